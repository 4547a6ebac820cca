#include "dtsim/sim/comm_hook.hpp"

namespace dtsim::sim {

const Registry<CommHook>& comm_hooks() {
    static const Registry<CommHook> registry = [] {
        Registry<CommHook> r("comm_hook");
        register_allreduce_hook(r);
        register_compress_hooks(r);
        register_powersgd_hooks(r);
        register_post_local_sgd_hook(r);
        return r;
    }();
    return registry;
}

}  // namespace dtsim::sim
