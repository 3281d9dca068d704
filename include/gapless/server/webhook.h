// The admission webhook's listener (--webhook-listen, docs/admission-webhook.md): HTTPS only (the
// API server calls webhooks over TLS), a door of its own (gapless/door/door.h) apart from the
// verbs' loopback listener and the probe listener, with these routes:
//   POST /mutate    AdmissionReview v1: the model pin (server/admission.h, mutate_pod)
//   POST /validate  AdmissionReview v1: the checks (validate_pod)
//   GET  /healthz, /readyz   as the extender's
// A body that is no AdmissionReview v1 gets 400 with {"Error": why}; the API server then
// applies the webhook's failurePolicy.
//
// The certificate files are re-read when they change (cert-manager renews the Secret and the
// kubelet updates the mounted files): connections after that get the new certificate.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "gapless/door/door.h"
#include "gapless/model/result.h"
#include "gapless/server/admission.h"
#include "gapless/server/extender.h"

namespace gapless::server {

struct WebhookOptions : door::DoorOptions {
  // Pods of this kube-scheduler profile are mutated and checked (--scheduler-name).
  std::string scheduler_name;
  // Values of nvidia.com/gpu.product on the cluster's nodes (Kubernetes mode: the node
  // informer's). Null: the GPU models of the extender's model (a --cluster file's nodes).
  std::function<std::set<std::string>()> product_labels;
  // How often the certificate files are checked for a change; 0: never.
  std::chrono::seconds cert_check_interval{30};
};

// What the webhook knows of the cluster now: the models and MIG profiles of the extender's
// model, the labels, and whether the extender is loaded.
AdmissionFacts admission_facts(const Extender& extender,
                               const std::function<std::set<std::string>()>& product_labels);
// The checks of `extender`'s policy and quotas, for pods of `scheduler_name`.
AdmissionChecks admission_checks(const Extender& extender, std::string scheduler_name);

class WebhookRoutes;

class WebhookServer {
 public:
  // Never fails: bind() says what is wrong with the options.
  WebhookServer(Extender& extender, WebhookOptions options);
  ~WebhookServer();  // stops
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // The bound port; an error without a certificate and key, or when the door cannot serve them
  // or bind the port.
  Result<int> bind(const std::string& host, int port);
  // Serves on a thread of its own (and watches the certificate files) until stop().
  // REQUIRES: bind() succeeded.
  void start();
  void stop();

 private:
  void watch_certificate();

  WebhookOptions options_;
  std::unique_ptr<WebhookRoutes> routes_;  // before the door, which borrows it
  std::unique_ptr<door::Door> door_;
  std::thread loop_, watcher_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace gapless::server
