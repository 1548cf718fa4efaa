#include "server/sources/mqtt_publisher.h"

#include <google/protobuf/util/json_util.h>
#include <mosquitto.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/proto_json.h"
#include "common/thread_name.h"
#include "server/internal_errors.h"

namespace vidclf::sources {
namespace {

// Publishes in flight at once: bounds what libmosquitto queues itself on a slow broker.
constexpr int kMaxInFlight = 64;

struct BrokerAddress {
  bool tls = false;
  std::string user, password, host;
  int port = 0;
};

absl::StatusOr<BrokerAddress> ParseUrl(absl::string_view url) {
  BrokerAddress address;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "mqtts://")) {
    address.tls = true;
    address.port = 8883;
  } else if (absl::ConsumePrefix(&rest, "mqtt://")) {
    address.port = 1883;
  } else {
    return absl::InvalidArgumentError("--mqtt-url must start with mqtt:// or mqtts://");
  }
  if (const size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    const absl::string_view user_info = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    const size_t colon = user_info.find(':');
    address.user = std::string(user_info.substr(0, colon));
    if (colon != absl::string_view::npos)
      address.password = std::string(user_info.substr(colon + 1));
  }
  absl::ConsumeSuffix(&rest, "/");
  if (const size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    if (!absl::SimpleAtoi(rest.substr(colon + 1), &address.port) || address.port < 1 ||
        address.port > 65535) {
      return absl::InvalidArgumentError("--mqtt-url: the port must be a number in [1, 65535]");
    }
    rest = rest.substr(0, colon);
  }
  if (rest.empty() || absl::StrContains(rest, "/")) {
    return absl::InvalidArgumentError("--mqtt-url must be mqtt[s]://[USER[:PASSWORD]@]HOST[:PORT]");
  }
  address.host = std::string(rest);
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MqttPublisher>> MqttPublisher::Start(MqttOptions options,
                                                                    UpdateFanout* fanout) {
  absl::StatusOr<BrokerAddress> address = ParseUrl(options.url);
  if (!address.ok()) return address.status();
  mosquitto_lib_init();
  std::unique_ptr<MqttPublisher> publisher(new MqttPublisher(std::move(options), fanout));
  const std::string& id = publisher->options_.client_id;
  publisher->client_ =
      mosquitto_new(id.empty() ? nullptr : id.c_str(), /*clean_session=*/true, publisher.get());
  if (publisher->client_ == nullptr)
    return absl::ResourceExhaustedError("cannot create an MQTT client");
  mosquitto* client = publisher->client_;
  if (!address->user.empty() &&
      mosquitto_username_pw_set(client, address->user.c_str(),
                                address->password.empty() ? nullptr : address->password.c_str()) !=
          MOSQ_ERR_SUCCESS) {
    return absl::InvalidArgumentError("--mqtt-url: the user name cannot be used");
  }
  if (address->tls) {
    const std::string& ca = publisher->options_.ca_file;
    if (mosquitto_tls_set(client, ca.empty() ? nullptr : ca.c_str(),
                          ca.empty() ? "/etc/ssl/certs" : nullptr, nullptr, nullptr,
                          nullptr) != MOSQ_ERR_SUCCESS) {
      return absl::InvalidArgumentError("--mqtt-ca: cannot read the CA bundle");
    }
  }
  mosquitto_connect_callback_set(client, &MqttPublisher::OnConnect);
  mosquitto_disconnect_callback_set(client, &MqttPublisher::OnDisconnect);
  mosquitto_publish_callback_set(client, &MqttPublisher::OnPublish);
  // A broker that is away is tried again after 1 s, then twice as long each time up to 30 s.
  mosquitto_reconnect_delay_set(client, 1, 30, /*exponential=*/true);
  if (mosquitto_loop_start(client) != MOSQ_ERR_SUCCESS) {
    return absl::InternalError("cannot start the MQTT client's thread");
  }
  // Connects in the background, and again whenever the connection drops.
  mosquitto_connect_async(client, address->host.c_str(), address->port, /*keepalive=*/30);
  publisher->sender_ = std::thread([raw = publisher.get()] { raw->SendLoop(); });
  fanout->Add(publisher.get(), {});
  return publisher;
}

MqttPublisher::MqttPublisher(MqttOptions options, UpdateFanout* fanout)
    : options_(std::move(options)), fanout_(fanout) {}

MqttPublisher::~MqttPublisher() {
  fanout_->Remove(this);
  {
    absl::MutexLock lock(&mutex_);
    // What is in flight gets a second to reach the broker.
    mutex_.AwaitWithTimeout(absl::Condition(
                                +[](int* in_flight) { return *in_flight == 0; }, &in_flight_),
                            absl::Seconds(1));
    stopping_ = true;
  }
  if (sender_.joinable()) sender_.join();
  if (client_ != nullptr) {
    mosquitto_disconnect(client_);
    mosquitto_loop_stop(client_, /*force=*/false);
    mosquitto_destroy(client_);
  }
  mosquitto_lib_cleanup();
}

void MqttPublisher::Offer(const vidclf::v1::SourceUpdate& update, bool droppable) {
  // A message that cannot be made costs that message, not the camera that sent it.
  RunGuarded("mqtt", update.name(), [&] {
    const std::string id = update.name().substr(update.name().find('/') + 1);
    const std::string base = absl::StrCat(options_.topic_prefix, "/", id, "/");
    absl::MutexLock lock(&mutex_);
    if (droppable) {
      if (!connected_) {
        ++stats_.dropped_predictions;
        return;
      }
      Message& waiting = predictions_[id];
      if (!waiting.topic.empty()) ++stats_.dropped_predictions;
      waiting = {base + "predictions", ProtoJson(update.prediction()), 0, false};
      return;
    }
    Message message;
    if (update.has_status()) {
      message = {base + "state", ProtoJson(update.status()), 1, true};
      states_[id] = message;
    } else {
      message = {base + "events", ProtoJson(update.events()), 1, false};
    }
    if (static_cast<int>(queue_.size()) >= options_.max_queued) {
      queue_.pop_front();
      ++stats_.dropped_events;
    }
    queue_.push_back(std::move(message));
  });
}

MqttPublisher::Stats MqttPublisher::stats() const {
  absl::MutexLock lock(&mutex_);
  Stats stats = stats_;
  stats.connected = connected_;
  return stats;
}

void MqttPublisher::SendLoop() {
  NameThisThread("vidclf-mqtt");
  absl::MutexLock lock(&mutex_);
  while (true) {
    mutex_.Await(absl::Condition(
        +[](MqttPublisher* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
          return self->stopping_ || (self->connected_ && self->in_flight_ < kMaxInFlight &&
                                     (!self->queue_.empty() || !self->predictions_.empty()));
        },
        this));
    if (stopping_) return;
    Message message;
    const bool from_queue = !queue_.empty();
    if (from_queue) {
      message = std::move(queue_.front());
      queue_.pop_front();
    } else {
      message = std::move(predictions_.begin()->second);
      predictions_.erase(predictions_.begin());
    }
    ++in_flight_;
    mutex_.Unlock();
    const int result = mosquitto_publish(client_, nullptr, message.topic.c_str(),
                                         static_cast<int>(message.payload.size()),
                                         message.payload.data(), message.qos, message.retain);
    mutex_.Lock();
    if (result == MOSQ_ERR_SUCCESS) {
      ++stats_.published;
    } else {
      --in_flight_;
      // Not connected after all: an event waits for the next connection, a prediction is lost.
      if (from_queue) {
        queue_.push_front(std::move(message));
      } else {
        ++stats_.dropped_predictions;
      }
      connected_ = false;
    }
  }
}

void MqttPublisher::OnConnect(mosquitto* /*client*/, void* self, int result) {
  auto* publisher = static_cast<MqttPublisher*>(self);
  absl::MutexLock lock(&publisher->mutex_);
  publisher->connected_ = result == 0;
  publisher->in_flight_ = 0;  // a new connection: nothing of the old one will be acknowledged
  if (!publisher->connected_) return;
  // Retained states first, so that a broker that restarted empty knows every camera again.
  for (const auto& [id, state] : publisher->states_) publisher->queue_.push_front(state);
}

void MqttPublisher::OnDisconnect(mosquitto* /*client*/, void* self, int /*result*/) {
  auto* publisher = static_cast<MqttPublisher*>(self);
  absl::MutexLock lock(&publisher->mutex_);
  publisher->connected_ = false;
}

void MqttPublisher::OnPublish(mosquitto* /*client*/, void* self, int /*message_id*/) {
  auto* publisher = static_cast<MqttPublisher*>(self);
  absl::MutexLock lock(&publisher->mutex_);
  if (publisher->in_flight_ > 0) --publisher->in_flight_;
}

}  // namespace vidclf::sources
