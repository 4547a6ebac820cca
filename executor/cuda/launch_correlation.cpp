// CUPTI API callbacks that attribute launches to tasks (cuda_backend.hpp). The
// runtime and driver domains are both watched: cuBLAS and our kernels launch
// through the runtime, NCCL through the driver, and a kernel's activity record
// carries the correlation id of whichever API call launched it.
#include "cuda_backend.hpp"

#include <cupti.h>

namespace dtsim::executor::cuda {
namespace {

thread_local int t_task = -1;

void CUPTIAPI on_api_call(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
    if (t_task < 0 || (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite == CUPTI_API_ENTER) static_cast<LaunchTagger*>(userdata)->record(info->correlationId);
}

}  // namespace

LaunchTagger::~LaunchTagger() {
    if (subscriber_) cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_));
}

std::string LaunchTagger::start() {
    if (subscriber_) return {};
    CUpti_SubscriberHandle s = nullptr;
    if (std::string m = failure_message(cuptiSubscribe(&s, on_api_call, this)); !m.empty())
        return "cuptiSubscribe failed: " + m;  // e.g. another profiler already subscribed
    for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
        if (std::string m = failure_message(cuptiEnableDomain(1, s, d)); !m.empty()) {
            cuptiUnsubscribe(s);
            return "cuptiEnableDomain failed: " + m;
        }
    subscriber_ = s;
    return {};
}

void LaunchTagger::set_task(int task) {
    t_task = task;
}

void LaunchTagger::record(std::uint32_t correlation) {
    std::lock_guard lock(mu_);
    tasks_[correlation] = t_task;
}

std::unordered_map<std::uint32_t, int> LaunchTagger::take() {
    std::lock_guard lock(mu_);
    std::unordered_map<std::uint32_t, int> out;
    out.swap(tasks_);
    return out;
}

}  // namespace dtsim::executor::cuda
