// Texts the fuzz targets build their fixtures from, embedded at build time (fuzz_data.cpp.in) so
// the fuzz binaries run from any directory.
#pragma once

namespace gapless::fuzz {

const char* demo_cluster_yaml();    // examples/demo-cluster.yaml
const char* default_policy_yaml();  // policies/default.yaml

}  // namespace gapless::fuzz
