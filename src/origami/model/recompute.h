// The recompute policy's names, shared by the model driver (which applies it, driver.h) and
// the planner (which prices it, plan/cost_model.h).
#pragma once

#include <string>

namespace origami {

enum class Recompute { None, Mlp, Full };
// "none", "mlp", "full"; anything else is a ConfigError naming the choices.
Recompute parse_recompute(const std::string& name);
std::string recompute_name(Recompute r);

}  // namespace origami
