#include "dtsim/common/json_io.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dtsim {
namespace {

const char* type_name(const Json& v) {
    return v.type_name();
}

}  // namespace

bool JsonView::has(const std::string& key) const {
    return value_->is_object() && value_->contains(key);
}

void JsonView::fail(const std::string& key, const std::string& expected) const {
    std::string field = key.empty() ? path_ : path_ + "/" + key;
    throw ParseError(file_, field, expected);
}

JsonView JsonView::at(const std::string& key) const {
    if (!value_->is_object()) fail("", fmt::format("expected an object, found {}", type_name(*value_)));
    auto it = value_->find(key);
    if (it == value_->end()) fail(key, "missing required field");
    return JsonView(*it, file_, path_ + "/" + key);
}

JsonView JsonView::at(std::size_t index) const {
    if (!value_->is_array()) fail("", fmt::format("expected an array, found {}", type_name(*value_)));
    if (index >= value_->size()) fail(std::to_string(index), "index out of range");
    return JsonView((*value_)[index], file_, path_ + "/" + std::to_string(index));
}

std::size_t JsonView::size() const {
    if (!value_->is_array()) fail("", fmt::format("expected an array, found {}", type_name(*value_)));
    return value_->size();
}

double JsonView::number(const std::string& key) const {
    JsonView v = at(key);
    if (!v.value().is_number()) fail(key, fmt::format("expected a number, found {}", type_name(v.value())));
    return v.value().get<double>();
}

double JsonView::number_or(const std::string& key, double fallback) const {
    return has(key) ? number(key) : fallback;
}

std::int64_t JsonView::integer(const std::string& key) const {
    JsonView v = at(key);
    if (!v.value().is_number_integer()) fail(key, fmt::format("expected an integer, found {}", type_name(v.value())));
    return v.value().get<std::int64_t>();
}

std::string JsonView::string(const std::string& key) const {
    JsonView v = at(key);
    if (!v.value().is_string()) fail(key, fmt::format("expected a string, found {}", type_name(v.value())));
    return v.value().get<std::string>();
}

std::string JsonView::string_or(const std::string& key, const std::string& fallback) const {
    return has(key) ? string(key) : fallback;
}

bool JsonView::boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    JsonView v = at(key);
    if (!v.value().is_boolean()) fail(key, fmt::format("expected true or false, found {}", type_name(v.value())));
    return v.value().get<bool>();
}

Json read_json_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ParseError(path, "", "cannot open the file (does it exist and is it readable?)");
    std::stringstream buffer;
    buffer << in.rdbuf();
    try {
        return Json::parse(buffer.str());
    } catch (const Json::parse_error& e) {
        throw ParseError(path, "", fmt::format("not valid JSON: {}", e.what()));
    }
}

void write_file_atomically(const std::string& path, const std::string& content) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(fmt::format("cannot write '{}': the directory does not exist or is not writable", path));
        out << content;
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(fmt::format("writing '{}' failed (disk full?); the previous file is untouched", path));
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(fmt::format("cannot replace '{}'; the previous file is untouched", path));
    }
}

}  // namespace dtsim
