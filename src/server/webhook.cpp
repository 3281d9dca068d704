// The admission webhook's listener and routes (gapless/server/webhook.h).
#include "gapless/server/webhook.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include "gapless/door/probe_routes.h"
#include "gapless/door/route_table.h"
#include "gapless/model/gpu.h"
#include "gapless/server/log.h"

namespace gapless::server {

using door::Answer;
using door::Route;

namespace {

void add_mig_profiles(const model::Node& node, std::set<std::string>* out) {
  for (const auto& [profile, pool] : node.mig_pool) out->insert(profile);
  for (const model::Gpu& g : node.gpus) {
    if (!g.mig.enabled) continue;
    for (const model::MigInstance& i : g.mig.instances) out->insert(i.profile);
    if (!g.mig.reconfigurable()) continue;
    for (const model::MigProfile& p : model::mig_profiles(g.mig_family)) {
      out->insert(std::string(p.name));
    }
  }
}

}  // namespace

AdmissionFacts admission_facts(const Extender& extender,
                               const std::function<std::set<std::string>()>& product_labels) {
  AdmissionFacts facts;
  facts.complete = extender.ready();
  std::set<std::string> models;
  extender.scheduler().read([&](const model::Cluster& c) {
    for (const model::Node* n : c.nodes()) {
      for (const model::Gpu& g : n->gpus) {
        if (!g.model.empty()) models.insert(g.model);
      }
      add_mig_profiles(*n, &facts.mig_profiles);
    }
  });
  facts.product_labels = product_labels ? product_labels() : models;
  for (const std::string& m : models) facts.model_keys.insert(model::model_key(m));
  for (const std::string& m : facts.product_labels) facts.model_keys.insert(model::model_key(m));
  return facts;
}

AdmissionChecks admission_checks(const Extender& extender, std::string scheduler_name) {
  AdmissionChecks checks;
  checks.scheduler_name = std::move(scheduler_name);
  const placement::Scheduler& scheduler = extender.scheduler();
  checks.profile_error = [&scheduler](const k8s::ParsedPod& pod) {
    std::string why;
    if (placement::Scheduler::select_profile(*scheduler.policy(), pod.info, &why) != nullptr) {
      return std::string();
    }
    return "gapless.io/policy: " + why;
  };
  checks.quota_never_fits = [&scheduler](const k8s::ParsedPod& pod) {
    return scheduler.quota_never_fits(pod.info, pod.request);
  };
  return checks;
}

class WebhookRoutes : public door::RouteTable {
 public:
  WebhookRoutes(Extender& extender, const WebhookOptions& options)
      : extender_(extender),
        options_(options),
        checks_(admission_checks(extender, options.scheduler_name)) {}

  Route find(const std::string& method, const std::string& path) const override {
    if (method == "GET" && (path == "/healthz" || path == "/readyz")) {
      return {Route::Lane::kLoop, path, false, false, false};
    }
    if (method == "POST" && (path == "/mutate" || path == "/validate")) {
      return {Route::Lane::kWorker, path, false, true, false};
    }
    return {};
  }
  Answer answer_now(const Route& route) const override {
    if (route.name == "/readyz" && !extender_.ready()) return door::text_answer(503, "not ready\n");
    return door::text_answer(200, "ok\n");
  }
  void handle(const Route& route, door::Request request, door::Reply reply) override {
    const bool mutate = route.name == "/mutate";
    auto answer = answer_review(request.body, [&](const nlohmann::json& pod) {
      const std::shared_ptr<const AdmissionFacts> facts = current_facts();
      return mutate ? mutate_pod(pod, *facts, checks_) : validate_pod(pod, *facts, checks_);
    });
    if (!answer) {
      log_warn("webhook " + route.name + ": " + answer.error());
      return reply(door::json_answer(400, door::error_json(answer.error())));
    }
    reply(door::json_answer(200, std::move(*answer)));
  }
  Answer refusal(const Route&, int status, const std::string& why) const override {
    return door::json_answer(status, door::error_json(why), true);
  }
  Answer overloaded(const Route&) const override {
    Answer a = door::json_answer(503, door::error_json("overloaded: retry shortly"), true);
    a.headers.emplace_back("Retry-After", "1");
    return a;
  }

 private:
  // Every pod creation in the selected namespaces reaches both webhooks, and the facts walk every
  // node: they are gathered at most once per kFactsTtl (the node informer lags more than that).
  static constexpr std::chrono::milliseconds kFactsTtl{1000};
  std::shared_ptr<const AdmissionFacts> current_facts() {
    std::lock_guard lock(facts_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (facts_ == nullptr || !facts_->complete || now - facts_at_ >= kFactsTtl) {
      facts_ = std::make_shared<const AdmissionFacts>(
          admission_facts(extender_, options_.product_labels));
      facts_at_ = now;
    }
    return facts_;
  }

  Extender& extender_;
  const WebhookOptions& options_;
  const AdmissionChecks checks_;
  std::mutex facts_mu_;
  std::shared_ptr<const AdmissionFacts> facts_;
  std::chrono::steady_clock::time_point facts_at_;
};

WebhookServer::WebhookServer(Extender& extender, WebhookOptions options)
    : options_(std::move(options)) {
  routes_ = std::make_unique<WebhookRoutes>(extender, options_);
  door_ = std::make_unique<door::Door>(*routes_, options_);
}

WebhookServer::~WebhookServer() {
  stop();
}

Result<int> WebhookServer::bind(const std::string& host, int port) {
  if (!door_->tls()) {
    return Error{
        "needs --webhook-tls-cert and --webhook-tls-key (the API server calls "
        "admission webhooks over HTTPS only)"};
  }
  return door_->bind(host, port);
}

void WebhookServer::start() {
  if (loop_.joinable() || !door_->bound()) return;
  loop_ = std::thread([this] { door_->run(); });
  if (options_.cert_check_interval.count() > 0)
    watcher_ = std::thread([this] { watch_certificate(); });
}

void WebhookServer::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  door_->stop();
  if (watcher_.joinable()) watcher_.join();
  if (loop_.joinable()) loop_.join();
}

// Polls the files' modification times: the kubelet replaces a mounted Secret's files through a
// symlink swap, which inotify on the file path would miss.
void WebhookServer::watch_certificate() {
  auto stamp = [this] {
    std::error_code ec;
    auto cert = std::filesystem::last_write_time(options_.tls_cert_file, ec);
    auto key = std::filesystem::last_write_time(options_.tls_key_file, ec);
    return std::pair{cert, key};
  };
  auto seen = stamp();
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, options_.cert_check_interval, [this] { return stopping_; })) {
    auto now = stamp();
    if (now == seen) continue;
    if (Status s = door_->reload_tls(); !s) {
      log_warn("webhook certificate not reloaded (the served one stays): " + s.error());
      continue;  // tried again at the next check
    }
    seen = now;
    log_info("webhook certificate reloaded from " + options_.tls_cert_file);
  }
}

}  // namespace gapless::server
