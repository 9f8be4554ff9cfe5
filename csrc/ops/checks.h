// Argument validation at the torch boundary. Every failure names the op, the argument, what was
// expected and what was given, and is raised before anything is written.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace replayssm::ops {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

// One expected dimension: a name for the message, and a size (kAnySize accepts any).
constexpr int64_t kAnySize = -1;
struct Dim {
  const char* name;
  int64_t size;
};

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return "float32";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Half: return "float16";
    case ScalarType::Double: return "float64";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Char: return "int8";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Bool: return "bool";
    default: return "other";
  }
}

// Integers are formatted with std::to_string, never streamed: on the GPU machine (torch 2.11) an
// error message that streamed an integer into std::ostringstream crashed the process (SIGSEGV)
// while string-only messages raised normally.
inline std::string shape_str(const Tensor& t) {
  std::ostringstream s;
  s << "(";
  for (int64_t i = 0; i < t.dim(); ++i) s << (i ? ", " : "") << std::to_string(t.size(i));
  s << ")";
  return s.str();
}

[[noreturn]] inline void fail(const char* op, const std::string& msg) {
  throw std::runtime_error(std::string(op) + ": " + msg);
}

inline void check_dtype(const char* op, const char* name, const Tensor& t,
                        std::initializer_list<ScalarType> allowed) {
  for (ScalarType a : allowed)
    if (t.scalar_type() == a) return;
  std::ostringstream s;
  s << name << " must have dtype ";
  bool first = true;
  for (ScalarType a : allowed) {
    s << (first ? "" : " or ") << dtype_name(a);
    first = false;
  }
  s << ", got " << dtype_name(t.scalar_type());
  fail(op, s.str());
}

inline void check_same_dtype(const char* op, const char* name, const Tensor& t, const char* ref_name,
                             ScalarType ref) {
  if (t.scalar_type() != ref)
    fail(op, std::string(name) + " must have the dtype of " + ref_name + " (" + dtype_name(ref) +
                 "), got " + dtype_name(t.scalar_type()));
}

inline void check_shape(const char* op, const char* name, const Tensor& t, std::initializer_list<Dim> dims) {
  bool ok = t.dim() == static_cast<int64_t>(dims.size());
  int64_t i = 0;
  for (const Dim& d : dims) {
    if (ok && d.size != kAnySize && t.size(i) != d.size) ok = false;
    ++i;
  }
  if (ok) return;
  std::ostringstream s;
  s << name << " must have shape (";
  bool first = true;
  for (const Dim& d : dims) {
    s << (first ? "" : ", ") << d.name;
    if (d.size != kAnySize) s << "=" << std::to_string(d.size);
    first = false;
  }
  s << "), got " << shape_str(t);
  fail(op, s.str());
}

// Dim 0 may have any stride (paged slot views); every inner dim must be densely packed so the
// kernels can address an element as base + slot * stride(0) + flat inner offset.
inline void check_inner_contiguous(const char* op, const char* name, const Tensor& t) {
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 1; --i) {
    if (t.size(i) != 1 && t.stride(i) != expected) {
      std::ostringstream s;
      s << name << " must be contiguous in every dim after dim 0 (dim " << std::to_string(i) << " stride "
        << std::to_string(expected) << " expected, got " << std::to_string(t.stride(i)) << ")";
      fail(op, s.str());
    }
    expected *= t.size(i);
  }
}

inline void check_contiguous(const char* op, const char* name, const Tensor& t) {
  if (!t.is_contiguous()) fail(op, std::string(name) + " must be contiguous");
}

inline std::string device_str(const Tensor& t) {
  if (t.is_cpu()) return "cpu";
  if (t.is_cuda()) return "cuda:" + std::to_string(static_cast<int>(t.get_device_index()));
  return "other";
}

inline void check_same_device(const char* op, const char* name, const Tensor& t, const Tensor& ref) {
  if (t.is_cpu() != ref.is_cpu() || t.is_cuda() != ref.is_cuda() ||
      (t.is_cuda() && t.get_device_index() != ref.get_device_index()))
    fail(op, std::string(name) + " must be on " + device_str(ref) + ", got " + device_str(t));
}

inline void check_positive(const char* op, const char* name, int64_t v) {
  if (v < 1) fail(op, std::string(name) + " must be >= 1, got " + std::to_string(v));
}

// null_slot as the kernels see it: kNoNullSlot (-1) when none was given.
inline int32_t null_slot_value(const char* op, std::optional<int64_t> null_slot) {
  if (!null_slot.has_value()) return -1;
  if (*null_slot < 0) fail(op, "null_slot must be >= 0 when given, got " + std::to_string(*null_slot));
  return static_cast<int32_t>(*null_slot);
}

}  // namespace replayssm::ops
