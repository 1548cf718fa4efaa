#!/usr/bin/env python3
"""Prints the ten slowest tests of a ctest run from its JUnit report (ctest --output-junit), so
that every run shows where its time went: python3 slowest-tests.py BUILD/ctest-results.xml."""
import sys
import xml.etree.ElementTree as ElementTree


def main(path):
    try:
        cases = ElementTree.parse(path).getroot().iter("testcase")
    except (OSError, ElementTree.ParseError) as error:
        print(f"slowest-tests: no report to read ({error})")
        return
    timed = sorted(((float(case.get("time", 0)), case.get("name", "?"), case.get("status", ""))
                    for case in cases), reverse=True)
    print("The ten slowest tests (seconds):")
    for seconds, name, status in timed[:10]:
        print(f"  {seconds:8.1f}  {name}{'' if status in ('run', '') else '  (' + status + ')'}")


if __name__ == "__main__":
    main(sys.argv[1])
