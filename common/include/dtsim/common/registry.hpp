// A named registry: things users pick by name (models, hardware presets,
// strategies, knobs). An unknown name is an error that lists the valid ones.
#pragma once

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtsim {

// "unknown model 'gtp2'; did you mean 'gpt2'? valid: a, b, c"
std::string unknown_name_message(std::string_view what, std::string_view name, const std::vector<std::string>& valid);

template <class T>
class Registry {
public:
    struct Entry {
        std::string name;
        std::string description;
        T value;
    };

    explicit Registry(std::string what) : what_(std::move(what)) {}

    void add(std::string name, std::string description, T value) {
        DTSIM_ASSERT(find_or_null(name) == nullptr, "duplicate registry name " + name);
        entries_.push_back({std::move(name), std::move(description), std::move(value)});
    }

    const Entry* find_or_null(std::string_view name) const {
        for (const auto& e : entries_)
            if (e.name == name) return &e;
        return nullptr;
    }

    const Entry& find(std::string_view name) const {
        if (const Entry* e = find_or_null(name)) return *e;
        throw ConfigError(unknown_name_message(what_, name, names()));
    }

    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& e : entries_) out.push_back(e.name);
        return out;
    }

    const std::vector<Entry>& entries() const { return entries_; }

private:
    std::string what_;
    std::vector<Entry> entries_;
};

}  // namespace dtsim
