#pragma once
// The bundled demo cluster (examples/demo-cluster.yaml), embedded at build time.
const char* gapless_demo_cluster();
