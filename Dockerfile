# gapless-extender container image; it also carries gapless-agent, the node agent that
# manifests/agent-daemonset.yaml runs with `command: [/usr/local/bin/gapless-agent]`.
#
#   docker build -t ghcr.io/gapless/gapless-extender:0.1.0 .
#   docker run --rm -p 8888:8888 ghcr.io/gapless/gapless-extender:0.1.0   # serves the demo cluster
#
# Two stages on Debian bookworm, the distribution CI builds on: the build stage installs the
# build packages of scripts/deps.sh (`--build-only`: not the test suite's chromium and ccache), the
# runtime stage only the shared libraries the binary links.

# ---- build -------------------------------------------------------------------------------------
FROM debian:bookworm AS build
ARG JOBS=4
# deps.sh alone first, so the package layer stays cached while the sources change.
COPY scripts/deps.sh /src/scripts/deps.sh
RUN /src/scripts/deps.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j"${JOBS}" --target gapless-extender gapless-agent kubectl-gapless \
 && strip /build/gapless-extender /build/gapless-agent /build/kubectl-gapless \
 && /build/gapless-extender --version \
 && /build/gapless-agent --version \
 && /build/gapless-extender --check-policy /src/policies/default.yaml

# ---- runtime -----------------------------------------------------------------------------------
FROM debian:bookworm-slim
# The runtime packages owning the binary's libraries (readelf -d / ldd, dpkg -S):
#   libcpp-httplib.so.0.11 -> libcpp-httplib0.11 (pulls libssl3, zlib1g, libbrotli1)
#   libyaml-cpp.so.0.7 -> libyaml-cpp0.7;  libprometheus-cpp-core.so.1.0 -> libprometheus-cpp-core1.0
#   libssl.so.3/libcrypto.so.3 -> libssl3 (HTTPS to the API server); libz -> zlib1g;
#   libbrotli{dec,enc,common} -> libbrotli1; libsimdjson.so.14 -> libsimdjson14 (full-node bodies);
#   libstdc++/libgcc_s/libc are already in the base image.
#   gapless-agent's device plugin: libgrpc++.so.1.51 -> libgrpc++1.51 (pulls libgrpc29),
#   libprotobuf.so.32 -> libprotobuf32.
# ca-certificates: for API servers whose certificate chains to a public CA (a kubeconfig without
# certificate-authority); in-cluster the ServiceAccount's ca.crt is used.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libyaml-cpp0.7 libprometheus-cpp-core1.0 libssl3 zlib1g libbrotli1 \
      libsimdjson14 libgrpc++1.51 libprotobuf32 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin nonroot
COPY --from=build /build/gapless-extender /usr/local/bin/gapless-extender
# The node agent dlopen()s libnvidia-ml.so.1 at run time; the NVIDIA container runtime mounts it
# into the agent's container (manifests/agent-daemonset.yaml), so the image carries no driver.
COPY --from=build /build/gapless-agent /usr/local/bin/gapless-agent
# The kubectl plugin (`kubectl gapless nodes|explain`), to copy out or run with kubectl exec.
COPY --from=build /build/kubectl-gapless /usr/local/bin/kubectl-gapless
# The shipped example policies, e.g. for `--check-policy /usr/share/gapless/policies/default.yaml`.
COPY policies/ /usr/share/gapless/policies/
# Fails the image build if a shared library is missing.
RUN ["/usr/local/bin/gapless-extender", "--version"]
RUN ["/usr/local/bin/gapless-agent", "--version"]
RUN ["/usr/local/bin/kubectl-gapless", "--help"]
# Numeric user, so the kubelet can verify runAsNonRoot; matches manifests/deployment.yaml.
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["/usr/local/bin/gapless-extender"]
# Without arguments: the built-in demo cluster, reachable from outside the container. The
# Deployment passes its own arguments (manifests/deployment.yaml).
CMD ["--listen=0.0.0.0:8888"]
