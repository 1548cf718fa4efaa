// Publishes every source's updates to an MQTT broker, after Frigate's convention for cameras:
//   PREFIX/ID/predictions   each prediction (QoS 0; the newest of each source when behind)
//   PREFIX/ID/events        segment events (QoS 1)
//   PREFIX/ID/state         the source's status when its state changes (QoS 1, retained)
// as JSON with the .proto's field names. Publishing never slows a camera: updates wait in a
// bounded queue while the broker is away or slow (predictions are dropped first, then the oldest
// events), drops are counted, and libmosquitto reconnects with back-off. Thread-safe.
#ifndef VIDCLF_SERVER_SOURCES_MQTT_PUBLISHER_H_
#define VIDCLF_SERVER_SOURCES_MQTT_PUBLISHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/sources/update_fanout.h"

struct mosquitto;

namespace vidclf::sources {

struct MqttOptions {
  // mqtt://[USER[:PASSWORD]@]HOST[:PORT] (1883) or mqtts://... (8883, TLS).
  std::string url;
  // mqtts: the CA bundle that signed the broker's certificate; empty: the system's.
  std::string ca_file;
  std::string topic_prefix = "vidclf";
  std::string client_id;
  // Events and state changes waiting for the broker, at most.
  int max_queued = 10000;
};

class MqttPublisher final : public UpdateSubscriber {
 public:
  // Subscribes to every source of `fanout` (which must outlive the publisher) and connects in
  // the background. INVALID_ARGUMENT naming --mqtt-url for one it cannot use.
  static absl::StatusOr<std::unique_ptr<MqttPublisher>> Start(MqttOptions options,
                                                              UpdateFanout* fanout);
  // Unsubscribes, sends what it can within a second, and disconnects.
  ~MqttPublisher() override;

  void Offer(const vidclf::v1::SourceUpdate& update, bool droppable) override;

  struct Stats {
    bool connected = false;
    int64_t published = 0;
    int64_t dropped_predictions = 0;
    int64_t dropped_events = 0;
  };
  Stats stats() const;

 private:
  struct Message {
    std::string topic;
    std::string payload;
    int qos = 0;
    bool retain = false;
  };
  MqttPublisher(MqttOptions options, UpdateFanout* fanout);
  // Publishes what waits while connected, a bounded number in flight at once.
  void SendLoop();
  static void OnConnect(mosquitto* client, void* self, int result);
  static void OnDisconnect(mosquitto* client, void* self, int result);
  static void OnPublish(mosquitto* client, void* self, int message_id);

  const MqttOptions options_;
  UpdateFanout* const fanout_;
  mosquitto* client_ = nullptr;

  mutable absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  bool connected_ ABSL_GUARDED_BY(mutex_) = false;
  // Events and state changes in order, and the newest prediction of each source.
  std::deque<Message> queue_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Message> predictions_ ABSL_GUARDED_BY(mutex_);
  // Each source's latest state, published again (retained) on every connection.
  std::map<std::string, Message> states_ ABSL_GUARDED_BY(mutex_);
  int in_flight_ ABSL_GUARDED_BY(mutex_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mutex_);
  std::thread sender_;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_MQTT_PUBLISHER_H_
