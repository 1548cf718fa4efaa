// Names the calling thread as `top -H`, `ps -L` and /proc/PID/task/TID/comm show it, so that a
// server's CPU time can be read by stage. Linux keeps the first 15 characters.
#ifndef VIDCLF_COMMON_THREAD_NAME_H_
#define VIDCLF_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace vidclf {

inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_THREAD_NAME_H_
