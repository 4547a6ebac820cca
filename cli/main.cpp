// dtsim: predict the step time and memory of data-parallel training, and
// explain what to run instead.
#include "commands.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/common/host_memory.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
    // Sweeps and the GUI run thousands of simulations: freed memory stays in
    // the process. Not for execute, which sets its own policy (ensure_mpi):
    // dtsim's, or glibc's defaults under --allocator torch, which no mallopt
    // call restores once another has turned glibc's dynamic threshold off.
    if (argc < 2 || std::string_view(argv[1]) != "execute") dtsim::keep_freed_memory();
    CLI::App app{
        "dtsim: a distributed-training simulator and performance advisor.\n"
        "Predicts step time, throughput and peak memory of PyTorch DDP, FSDP and\n"
        "DeepSpeed ZeRO configurations before you spend the GPUs.",
        "dtsim"};
    app.set_version_flag("--version", "dtsim 0.1.0");
    app.require_subcommand(0, 1);
    app.footer(
        "Examples:\n"
        "  dtsim demo\n"
        "  dtsim simulate --model gpt2-xl --hardware h100-sxm --nodes 2 --gpus-per-node 8 \\\n"
        "      --strategy ddp --micro-batch 4 --seq-len 1024 --precision bf16-mixed --set bucket_cap_mb=25 \\\n"
        "      --trace ddp.json\n"
        "  mpirun -np 2 dtsim calibrate --quick --out cal.json    # measure this machine (seconds; drop --quick for "
        "the full one)\n"
        "  dtsim models      # the built-in models\n"
        "  dtsim hardware    # the built-in hardware presets");
    dtsim::cli::add_simulate_command(app);
    dtsim::cli::add_demo_command(app);
    dtsim::cli::add_models_command(app);
    dtsim::cli::add_hardware_command(app);
    dtsim::cli::add_calibrate_command(app);
    dtsim::cli::add_execute_command(app);
    dtsim::cli::add_validate_command(app);
    dtsim::cli::add_sweep_command(app);
    dtsim::cli::add_advise_command(app);
    dtsim::cli::add_scale_command(app);
    dtsim::cli::add_import_command(app);
    dtsim::cli::add_gui_command(app);
    try {
        app.parse(argc, argv);
        if (app.get_subcommands().empty()) {
            std::fputs(app.help().c_str(), stdout);
            return 0;
        }
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const dtsim::Error& e) {
        fmt::print(stderr, "dtsim: error: {}\n", e.what());
        return e.exit_code();
    } catch (const dtsim::InternalError& e) {
        fmt::print(stderr, "dtsim: {}\n", e.what());
        return 70;
    }
    return 0;
}
