#include "server/engine/worker_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace vidclf::engine {
namespace {

using ::testing::ElementsAre;

TEST(WorkerPoolTest, OneThreadRunsTasksInTheOrderQueued) {
  std::vector<int> order;  // written by the pool's one thread only
  {
    WorkerPool pool(1);
    absl::Notification started, release;
    pool.Run([&] {
      started.Notify();
      release.WaitForNotification();
    });
    started.WaitForNotification();
    for (int i = 0; i < 5; ++i) pool.Run([&order, i] { order.push_back(i); });
    EXPECT_EQ(pool.queued(), 5);  // the first task holds the only thread
    release.Notify();
  }  // the destructor runs what is still queued
  EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4));
}

TEST(WorkerPoolTest, EachThreadRunsTheSetupOnceBeforeItsFirstTask) {
  absl::Mutex mutex;
  std::set<std::thread::id> set_up;
  int setups = 0;
  std::atomic<int> tasks_on_set_up_threads{0};
  {
    WorkerPool pool(3, [&] {
      absl::MutexLock lock(&mutex);
      set_up.insert(std::this_thread::get_id());
      ++setups;
    });
    for (int i = 0; i < 30; ++i) {
      pool.Run([&] {
        absl::MutexLock lock(&mutex);
        if (set_up.count(std::this_thread::get_id()) == 1) ++tasks_on_set_up_threads;
      });
    }
  }
  EXPECT_EQ(setups, 3);
  EXPECT_EQ(tasks_on_set_up_threads, 30);
}

TEST(WorkerPoolTest, ThreadsRunTasksSideBySide) {
  // Three tasks that each wait for the other two to start finish only if three threads run them.
  std::atomic<int> started{0};
  {
    WorkerPool pool(3);
    for (int i = 0; i < 3; ++i) {
      pool.Run([&] {
        ++started;
        while (started.load() < 3) std::this_thread::yield();
      });
    }
  }
  EXPECT_EQ(started, 3);
}

TEST(WorkerPoolTest, ReleasesWhatATaskCapturedBeforeTheNextStarts) {
  WorkerPool pool(1);
  auto captured = std::make_shared<int>(7);
  std::weak_ptr<int> watch = captured;
  pool.Run([captured = std::move(captured)] { (void)*captured; });
  absl::Notification checked;
  bool released_before_next = false;
  pool.Run([&] {
    released_before_next = watch.expired();
    checked.Notify();
  });
  checked.WaitForNotification();
  EXPECT_TRUE(released_before_next);
}

}  // namespace
}  // namespace vidclf::engine
