#include "origami/core/dtype.h"

namespace origami {

bool parse_dtype(std::string_view name, DType* out) {
  for (DType t : {DType::F32, DType::BF16, DType::F64, DType::I32, DType::I64, DType::F16}) {
    if (dtype_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

}  // namespace origami
