#!/usr/bin/env python3
"""Samples where a process's CPU time goes, thread by thread, and the machine's, until stopped.

Usage: thread_cpu.py PID OUTPUT.jsonl [INTERVAL_S]

Every INTERVAL_S (default 1) writes one JSON line: the time, the machine's busy and total CPU
ticks (/proc/stat) and each of PID's threads' name and CPU ticks (user and system) by thread id.
Threads that end between two samples keep the ticks of their last one; bench/gpu/serving_report.py
adds them up by thread name (the server names its threads by stage: vidclf-feed, vidclf-backbone,
vidclf-head, ...). Stops on SIGTERM or when PID ends.
"""
import json
import os
import signal
import sys
import time


def machine_ticks():
    with open("/proc/stat", encoding="ascii") as file:
        fields = [int(value) for value in file.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def thread_ticks(pid):
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8", errors="replace") as file:
                stat = file.read()
        except OSError:
            continue  # it ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        threads[tid] = [name, int(fields[11]) + int(fields[12])]  # utime, stime
    return threads


def main():
    pid, output = int(sys.argv[1]), sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    with open(output, "w", encoding="utf-8") as file:
        while os.path.exists(f"/proc/{pid}"):
            busy, total = machine_ticks()
            file.write(json.dumps({"t": time.time(), "machine_busy": busy, "machine_total": total,
                                   "ticks_per_s": os.sysconf("SC_CLK_TCK"),
                                   "threads": thread_ticks(pid)}) + "\n")
            file.flush()
            if stopped:
                break
            time.sleep(interval)


if __name__ == "__main__":
    main()
