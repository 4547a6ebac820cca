#include "dtsim/sim/lightning_names.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace dtsim::sim {
namespace {

// strategy-semantics.md §7: start methods of Lightning's launchers.
constexpr const char* kPopen =
    "the main process re-runs the script once per extra rank (subprocess.Popen); each rank pays a full "
    "interpreter start, imports and model construction, in parallel";
constexpr const char* kSpawn =
    "mp.start_processes pickles the trainer into fresh interpreters (objects must be picklable); rank 0 "
    "saves a checkpoint the parent reloads at the end";
constexpr const char* kFork =
    "forked children share memory copy-on-write, no pickling or re-import (cheapest; fails if CUDA was "
    "initialised in the parent)";

// DeepSpeedStrategy's defaults where they differ from DeepSpeed's (lightning strategies/deepspeed.py).
std::vector<std::pair<std::string, std::string>> lightning_zero_defaults() {
    return {{"overlap_comm", "true"}, {"reduce_bucket_size", "2e8"}, {"allgather_bucket_size", "2e8"},
            {"sub_group_size", "1e12"}};
}

std::vector<LightningStrategy> make_names() {
    std::vector<LightningStrategy> v;
    for (const auto& [name, launch] : {std::pair{"ddp", kPopen}, std::pair{"ddp_spawn", kSpawn},
                                       std::pair{"ddp_fork", kFork}, std::pair{"ddp_notebook", kFork}}) {
        std::string n = name;
        if (n != "ddp") v.push_back({n, "ddp", {}, launch});
        v.push_back({n + "_find_unused_parameters_true", "ddp", {{"find_unused_parameters", "true"}}, launch});
        v.push_back({n + "_find_unused_parameters_false", "ddp", {{"find_unused_parameters", "false"}}, launch});
    }
    // FSDPStrategy: no auto_wrap_policy unless given (one unit, the root), and
    // the report says Lightning built it (docs/notes/library-memory-rules.md §2b).
    const std::vector<std::pair<std::string, std::string>> lightning_fsdp = {{"frontend", "lightning"}};
    v.push_back({"lightning:fsdp", "fsdp", lightning_fsdp, kPopen});
    auto offload = lightning_fsdp;
    offload.emplace_back("cpu_offload", "true");
    v.push_back({"fsdp_cpu_offload", "fsdp", offload, kPopen});
    v.push_back({"lightning:ddp", "ddp", {}, kPopen});
    // DeepSpeedStrategy's own defaults, which differ from DeepSpeed's: overlap_comm
    // on, 2e8-element buckets, sub_group_size 1e12 (lightning strategies/deepspeed.py).
    const std::vector<std::pair<std::string, std::string>> lightning_zero = lightning_zero_defaults();
    auto zero = [&](const std::string& name, std::vector<std::pair<std::string, std::string>> extra) {
        auto knobs = lightning_zero;
        knobs.insert(knobs.end(), extra.begin(), extra.end());
        v.push_back({name, "deepspeed", std::move(knobs), kPopen});
    };
    zero("deepspeed_stage_1", {{"stage", "1"}});
    zero("deepspeed_stage_1_offload", {{"stage", "1"}, {"offload_optimizer", "cpu"}});
    zero("deepspeed_stage_2", {{"stage", "2"}});
    zero("deepspeed_stage_2_offload", {{"stage", "2"}, {"offload_optimizer", "cpu"}});
    zero("deepspeed_stage_3", {{"stage", "3"}});
    zero("deepspeed_stage_3_offload", {{"stage", "3"}, {"offload_optimizer", "cpu"}, {"offload_param", "cpu"}});
    zero("deepspeed_stage_3_offload_nvme", {{"stage", "3"}, {"offload_optimizer", "nvme"}, {"offload_param", "nvme"}});
    return v;
}

// A keyword of a Lightning strategy class: the dtsim knob it sets (empty:
// accepted, changes nothing dtsim models, noted).
struct Keyword {
    const char* name;
    const char* knob;
};

const std::map<std::string, std::vector<Keyword>>& keywords() {
    static const std::map<std::string, std::vector<Keyword>> k = {
        {"DDPStrategy",
         {{"find_unused_parameters", "find_unused_parameters"},
          {"gradient_as_bucket_view", "gradient_as_bucket_view"},
          {"static_graph", "static_graph"},
          {"bucket_cap_mb", "bucket_cap_mb"},
          {"broadcast_buffers", "broadcast_buffers"},
          {"start_method", ""},
          {"process_group_backend", ""},
          {"timeout", ""},
          {"accelerator", ""},
          {"checkpoint_io", ""}}},
        {"FSDPStrategy",
         {{"sharding_strategy", "sharding_strategy"},
          {"cpu_offload", "cpu_offload"},
          {"auto_wrap_policy", "auto_wrap_policy"},
          {"backward_prefetch", "backward_prefetch"},
          {"forward_prefetch", "forward_prefetch"},
          {"limit_all_gathers", "limit_all_gathers"},
          {"activation_checkpointing_policy", "activation_checkpointing_policy"},
          {"activation_checkpointing", "activation_checkpointing_policy"},  // its deprecated name
          {"state_dict_type", ""},
          {"use_orig_params", ""},
          {"sync_module_states", ""},
          {"process_group_backend", ""},
          {"timeout", ""},
          {"accelerator", ""}}},
        {"DeepSpeedStrategy",
         {{"stage", "stage"},
          {"offload_optimizer", "offload_optimizer"},
          {"offload_parameters", "offload_param"},
          {"offload_optimizer_device", "offload_optimizer"},
          {"offload_params_device", "offload_param"},
          {"overlap_comm", "overlap_comm"},
          {"contiguous_gradients", "contiguous_gradients"},
          {"allgather_bucket_size", "allgather_bucket_size"},
          {"reduce_bucket_size", "reduce_bucket_size"},
          {"sub_group_size", "sub_group_size"},
          {"reduce_scatter", "reduce_scatter"},
          {"logging_level", ""},
          {"process_group_backend", ""},
          {"timeout", ""},
          {"accelerator", ""}}},
    };
    return k;
}

// A small recursive-descent reader of one call expression.
class ExpressionParser {
public:
    explicit ExpressionParser(const std::string& text) : t_(text) {}

    LightningExpression parse() {
        const std::size_t class_at = skip_spaces();
        const std::string cls = name();
        const auto found = keywords().find(cls);
        if (found == keywords().end())
            fail(class_at, "a Lightning strategy class: DDPStrategy, FSDPStrategy or DeepSpeedStrategy");
        expect('(');
        std::vector<std::pair<std::string, std::string>> args;
        std::map<std::string, std::size_t> seen;
        while (true) {
            const std::size_t at = skip_spaces();
            if (peek() == ')') break;
            const std::string key = name();
            if (key.empty()) fail(at, "a keyword argument (key=value) or ')'");
            if (!seen.emplace(key, at).second) fail(at, fmt::format("'{}' once (it is given twice)", key));
            skip_spaces();
            if (peek() != '=') fail(pos_, fmt::format("'=' after '{}' (arguments are by keyword)", key));
            ++pos_;
            args.emplace_back(key, value());
            if (t_[at_value_] == '{' || t_[at_value_] == '[') set_valued_.push_back(key);
            skip_spaces();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() != ')') fail(pos_, "',' or ')'");
            break;
        }
        expect(')');
        if (skip_spaces() != t_.size()) fail(pos_, "the end of the expression");
        // lightning/fabric/strategies/fsdp.py, _activation_checkpointing_kwargs: a ValueError there too.
        if (seen.contains("activation_checkpointing") && seen.contains("activation_checkpointing_policy"))
            fail(seen.at("activation_checkpointing"),
                 "activation_checkpointing_policy alone (Lightning refuses both; the other is its deprecated name)");
        return build(cls, found->second, args, seen);
    }

private:
    [[noreturn]] void fail(std::size_t at, const std::string& expected) const {
        const std::string rest = at < t_.size() ? t_.substr(at, 12) : std::string("end");
        throw ConfigError(fmt::format("--strategy \"{}\": expected {} at character {} (\"{}\")", t_, expected,
                                      at + 1, rest));
    }
    char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
    std::size_t skip_spaces() {
        while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
        return pos_;
    }
    void expect(char c) {
        skip_spaces();
        if (peek() != c) fail(pos_, fmt::format("'{}'", c));
        ++pos_;
    }
    std::string name() {
        const std::size_t b = pos_;
        while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
        if (pos_ > b && std::isdigit(static_cast<unsigned char>(t_[b]))) fail(b, "a name");
        return t_.substr(b, pos_ - b);
    }
    // The value as a knob's text: True/False/None lower-cased, strings unquoted,
    // a dotted name's last part.
    std::string value() {
        const std::size_t at = at_value_ = skip_spaces();
        const char c = peek();
        if (c == '\'' || c == '"') {
            const std::size_t end = t_.find(c, pos_ + 1);
            if (end == std::string::npos) fail(at, fmt::format("a closing {}", c));
            std::string v = t_.substr(pos_ + 1, end - pos_ - 1);
            pos_ = end + 1;
            return v;
        }
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.') {
            const std::size_t b = pos_;
            ++pos_;
            while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' ||
                                        t_[pos_] == '_' || ((t_[pos_] == '-' || t_[pos_] == '+') &&
                                                            (t_[pos_ - 1] == 'e' || t_[pos_ - 1] == 'E'))))
                ++pos_;
            std::string v = t_.substr(b, pos_ - b);
            v.erase(std::remove(v.begin(), v.end(), '_'), v.end());  // Python's 25_000_000
            return v;
        }
        if (c == '{') return class_set('}');
        if (c == '[') return class_set(']');  // the deprecated activation_checkpointing=[Block]
        if (c == '(') fail(at, "a plain value (calls are outside the accepted grammar)");
        const std::string v = last_of_dotted_name(at, "a value: True, False, None, a number, a 'string' or a name");
        if (peek() == '(' || peek() == '[' || peek() == '{')
            fail(pos_, "a plain value (calls are outside the accepted grammar; a policy's classes go in a set)");
        if (v == "True") return "true";
        if (v == "False") return "false";
        if (v == "None") return "none";
        return v;
    }

    // Name{.Name} at `at` (the cursor), as its last part; `expected` names what the first must be.
    std::string last_of_dotted_name(std::size_t at, const char* expected) {
        std::string v = name();
        if (v.empty()) fail(at, expected);
        while (peek() == '.') {
            ++pos_;
            const std::size_t part_at = pos_;
            v = name();
            if (v.empty()) fail(part_at, "a name after '.'");
        }
        return v;
    }

    // "{a.B, C}" or "[a.B, C]": module classes (a policy), as "B,C".
    std::string class_set(char close) {
        ++pos_;
        std::string out;
        while (true) {
            const std::size_t at = skip_spaces();
            if (!out.empty()) out += ',';
            out += last_of_dotted_name(at, "a module class name in the set");
            skip_spaces();
            if (peek() == ',') {
                ++pos_;
                if (skip_spaces(), peek() == close) break;
                continue;
            }
            if (peek() != close) fail(pos_, fmt::format("',' or '{}'", close));
            break;
        }
        ++pos_;
        return out;
    }

    LightningExpression build(const std::string& cls, const std::vector<Keyword>& accepted,
                              const std::vector<std::pair<std::string, std::string>>& args,
                              const std::map<std::string, std::size_t>& seen) const {
        LightningExpression out;
        LightningStrategy& s = out.strategy;
        s.name = t_;
        s.launch = kPopen;
        if (cls == "DDPStrategy") s.strategy = "ddp";
        if (cls == "FSDPStrategy") {
            s.strategy = "fsdp";
            s.knobs = {{"frontend", "lightning"}};
        }
        if (cls == "DeepSpeedStrategy") {
            s.strategy = "deepspeed";
            s.knobs = lightning_zero_defaults();
        }
        std::string optimizer_device = "cpu", param_device = "cpu";
        bool offload_optimizer = false, offload_param = false;
        for (const auto& [key, value] : args) {
            const Keyword* k = nullptr;
            for (const Keyword& a : accepted)
                if (key == a.name) k = &a;
            if (k == nullptr) {
                std::string names;
                for (const Keyword& a : accepted) names += std::string(names.empty() ? "" : ", ") + a.name;
                fail(seen.at(key), fmt::format("a keyword of {} ({})", cls, names));
            }
            if (key == "start_method") {
                if (value == "spawn") s.launch = kSpawn;
                else if (value == "fork") s.launch = kFork;
                else if (value != "popen") fail(seen.at(key), "start_method 'popen', 'spawn' or 'fork'");
                continue;
            }
            if (std::string(k->knob).empty()) {
                out.notes.push_back(fmt::format("{}={} changes nothing dtsim models", key, value));
                continue;
            }
            // DeepSpeedStrategy: offload_* are booleans, the *_device keywords say where.
            if (key == "offload_optimizer") offload_optimizer = value == "true";
            else if (key == "offload_parameters") offload_param = value == "true";
            else if (key == "offload_optimizer_device") optimizer_device = value;
            else if (key == "offload_params_device") param_device = value;
            // auto_wrap_policy={Block}: transformer_auto_wrap_policy over those classes.
            else if (key == "auto_wrap_policy" &&
                     std::find(set_valued_.begin(), set_valued_.end(), key) != set_valued_.end()) {
                s.knobs.emplace_back("auto_wrap_policy", "transformer");
                s.knobs.emplace_back("transformer_layer_cls", value);
            } else
                s.knobs.emplace_back(k->knob, value);
        }
        if (offload_optimizer) s.knobs.emplace_back("offload_optimizer", optimizer_device);
        if (offload_param) s.knobs.emplace_back("offload_param", param_device);
        return out;
    }

    const std::string& t_;
    std::size_t pos_ = 0;
    std::size_t at_value_ = 0;             // where the last value began
    std::vector<std::string> set_valued_;  // keywords given a set of classes
};

}  // namespace

std::optional<LightningExpression> parse_lightning_expression(const std::string& text) {
    if (text.find('(') == std::string::npos) return std::nullopt;
    return ExpressionParser(text).parse();
}

const std::vector<LightningStrategy>& lightning_strategies() {
    static const std::vector<LightningStrategy> names = make_names();
    return names;
}

namespace {

std::optional<std::string> resolve_name(Config& config) {
    if (auto e = parse_lightning_expression(config.strategy)) {
        config.strategy = e->strategy.strategy;
        auto knobs = e->strategy.knobs;
        knobs.insert(knobs.end(), config.knobs.begin(), config.knobs.end());
        config.knobs = std::move(knobs);
        std::string launch = e->strategy.launch;
        for (const std::string& note : e->notes) launch += "; " + note;
        return launch;
    }
    // "ddp", "fsdp" and "deepspeed" are dtsim strategies already; they launch like Lightning's defaults.
    for (const auto& l : lightning_strategies()) {
        if (l.name != config.strategy) continue;
        config.strategy = l.strategy;
        auto knobs = l.knobs;
        knobs.insert(knobs.end(), config.knobs.begin(), config.knobs.end());
        config.knobs = std::move(knobs);
        return l.launch;
    }
    return std::nullopt;
}

// Lightning's FSDPStrategy(activation_checkpointing_policy={Block}) wraps
// every module of those classes in checkpoint_wrapper
// (lightning/fabric/strategies/fsdp.py, _setup_activation_checkpointing):
// for the model's block class, what --activation-checkpointing models.
// lower_fsdp checks the classes against the model's (check_block_classes).
void apply_checkpointing_policy(Config& config) {
    if (config.strategy != "fsdp") return;
    std::string policy = "none";
    for (const auto& [name, value] : config.knobs)
        if (name == "activation_checkpointing_policy") policy = value;
    if (policy == "none" || policy == "None") return;
    if (config.ac_freq > 1 || config.ac_op)
        throw ConfigError(
            fmt::format("activation_checkpointing_policy={} checkpoints every block whole; --ac-freq and "
                        "--ac-op choose blocks or ops otherwise: give one or the other",
                        policy));
    config.activation_checkpointing = true;
}

}  // namespace

std::optional<std::string> resolve_lightning_name(Config& config) {
    auto launch = resolve_name(config);
    apply_checkpointing_policy(config);
    return launch;
}

}  // namespace dtsim::sim
