#!/usr/bin/env python3
"""Latency and RSS of gapless-extender under the hostile clients of issues 28 and 38.

Starts the extender (demo cluster) on 127.0.0.1, its verbs on --listen over HTTP or HTTPS (a
throw-away self-signed certificate made with the openssl command) and its probes on
--probe-listen (plain HTTP, as the shipped Deployment), measures a normal client alone (filter
latency, sequential, on one connection opened before each attack as kube-scheduler keeps its
connections; /healthz on the probe listener, a new connection per call as the kubelet probes),
then again while each attack runs against --listen:

  slow-chunked   2 x --workers connections sending a chunked filter body 1 byte per 0.5 s,
                 reopened when cut
  slow-expect    the same with "Expect: 100-continue" and a Content-Length body
  slow-readers   2 x --workers clients pipelining /debug/explain of 60,000 unknown nodes and
                 never reading
  big-heads      4 connections sending 100 KiB heads in a loop, and one 64 MB head
  explain-1m     3 clients at once asking /debug/explain for 1M node names
  conn-flood     --max-connections idle connections, from 127.0.0.2
  filter-1m      2 clients posting /filter bodies (15.7 MB, under the 16 MiB bound) that name
                 1.2M unknown nodes
                 (issue 38: the verdict cache's lock and the 68 MB answer)
  filter-1m-8    the same with 8 clients
  peers-flood    5 peer addresses (127.0.0.2-6) each opening --max-connections-per-peer
                 connections (256): every slot of --listen and its probe reserve held
  tls-handshakes (--tls only) new TLS connections at --handshakes per second (default 400),
                 each closed after its handshake

and prints filter p50/p99 and /healthz p99/max per phase, RSS and peak RSS (VmHWM), the load
average (the machine is shared: a phase that misses a target while the load is high is worth a
rerun), RSS --settle seconds after each attack ends, RSS --after seconds after the last one, and
whether issue 38's targets held: /healthz max <= 100 ms, filter p99 <= max(20 ms, 2 x unloaded),
RSS --settle s after within 50 MiB of idle.

With --agent, the binary is gapless-agent (no cluster: an unreachable API server, no NVML) and
only its status server is attacked (issue 38), /healthz alone measured:

  idle-slowloris 200 idle connections and 200 sending a head one byte per second, each reopened
                 when cut, from 16 loopback addresses (127.0.0.2-17; the kubelet is another peer)
  big-heads-8m   4 connections sending 8 MB heads in a loop

Usage: scripts/attack_probe.py build/gapless-extender [--tls] [--workers 4] [--seconds 10]
                               [--only PHASE[,PHASE...]] [--settle 10] [--after 60]
                               [--handshakes 400] [--tls-key rsa|ec]
       scripts/attack_probe.py build/gapless-agent --agent [--seconds 10] [--settle 10] [--after 10]
Only the Python standard library (and the openssl command for --tls).
"""
import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

FILTER = json.dumps({"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                             "spec": {"containers": [{"name": "c", "resources": {
                                 "limits": {"nvidia.com/gpu": "1"}}}]}},
                     "Nodes": None, "NodeNames": ["h100-nvs-01"]}).encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    return out


class Target:
    def __init__(self, port, tls):
        self.port, self.tls = port, tls
        self.ctx = None
        if tls:
            self.ctx = ssl.create_default_context()
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE

    def connect(self, timeout=30, source=None):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout,
                                     source_address=(source, 0) if source else None)
        return self.ctx.wrap_socket(s) if self.tls else s


def read_answer(s):
    """One HTTP answer with a Content-Length body from a blocking socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return head.split(b" ")[1], body


def timed_calls(target, seconds, request, fresh=False, conn=None):
    """Latencies (ms) of `request` repeated on one kept connection (`conn`, else opened here) for
    `seconds` (fresh: a new connection for each, as the kubelet probes; the connect is timed
    too)."""
    out, end = [], time.time() + seconds
    s = conn
    while time.time() < end:
        try:
            t0 = time.perf_counter()
            if s is None:
                s = target.connect()
                if not fresh:
                    t0 = time.perf_counter()
            s.sendall(request)
            read_answer(s)
            out.append((time.perf_counter() - t0) * 1000)
            if fresh:
                s.close()
                s = None
        except (OSError, ConnectionError):
            out.append(float("inf"))
            s = None
    return out


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


class Attack:
    def __init__(self):
        self.stop = threading.Event()
        self.threads = []
        self.done = 0  # what a counting attack did (handshakes)
        self.held = 0  # connections a flood holds
        self.settled = threading.Event()  # cleared by an attack that takes a while to set up
        self.settled.set()
        self.started = time.time()

    def spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)


def trickle(attack, target, head, body):
    while not attack.stop.is_set():
        try:
            s = target.connect()
            s.sendall(head)
            for b in body:
                if attack.stop.wait(0.5):
                    break
                s.sendall(bytes([b]))
            s.close()
        except OSError:
            time.sleep(0.1)


def never_read(attack, target, request, count):
    while not attack.stop.is_set():
        try:
            s = target.connect()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(2)
            for _ in range(count):
                s.sendall(request)
            attack.stop.wait(60)
            s.close()
        except OSError:
            time.sleep(0.1)


def big_head(attack, target, size, once=False):
    line = b"X-Pad: " + b"a" * 100 + b"\r\n"
    while not attack.stop.is_set():
        try:
            s = target.connect()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            sent = 0
            while sent < size and not attack.stop.is_set():
                s.sendall(line * 600)
                sent += len(line) * 600
            s.sendall(b"\r\n")
            s.recv(100)
            s.close()
        except OSError:
            pass
        if once:
            return


def names_request(path, count, prefix="n"):
    """An ExtenderArgs naming `count` unknown nodes, POSTed to `path`. Built once per phase,
    before it is measured: building it holds the GIL for a second, which the measuring threads
    (in this process) would count as the server's latency."""
    names = [f"{prefix}{i}" for i in range(count)]
    body = json.dumps({"Pod": json.loads(FILTER)["Pod"], "NodeNames": names}).encode()
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path, len(body))) + body


def post_names(attack, target, req):
    """POSTs `req` (names_request) in a loop."""
    while not attack.stop.is_set():
        try:
            s = target.connect(timeout=120)
            s.sendall(req)
            read_answer(s)
            s.close()
        except (OSError, ConnectionError):
            time.sleep(0.1)


def flood(attack, target, n):
    # From another loopback address than the measuring client, so the measurement shows what
    # the extender keeps for other peers, not its per-peer refusal of the flooder.
    held = []
    for _ in range(n):
        try:
            held.append(socket.create_connection(("127.0.0.1", target.port), timeout=5,
                                                 source_address=("127.0.0.2", 0)))
        except OSError:
            break
    attack.stop.wait()
    for s in held:
        s.close()


def peers_flood(attack, target, sources, per_peer):
    """Connections from each of `sources` up to the per-peer bound, all held (issue 38)."""
    held = []
    for i in range(len(sources) * per_peer):
        try:
            held.append(socket.create_connection(("127.0.0.1", target.port), timeout=5,
                                                 source_address=(sources[i % len(sources)], 0)))
        except OSError:
            pass
    attack.held = len(held)
    attack.settled.set()  # measured once every connection is open
    attack.stop.wait()
    for s in held:
        s.close()


def handshakes(attack, target, rate):
    """New TLS connections at `rate` per second, each closed after its handshake."""
    step, due = 1.0 / rate, time.perf_counter()
    while not attack.stop.is_set():
        try:
            target.connect(timeout=5).close()
            attack.done += 1
        except OSError:
            pass
        due += step
        wait = due - time.perf_counter()
        if wait > 0:
            attack.stop.wait(wait)
        elif wait < -1:
            due = time.perf_counter()  # fell behind: do not burst to catch up


def hold_idle(attack, target, source):
    """One connection that never sends a byte, reopened when the server closes it."""
    while not attack.stop.is_set():
        try:
            s = target.connect(source=source)
            s.settimeout(1)
            while not attack.stop.is_set():
                try:
                    if not s.recv(100):
                        break  # closed by the server
                except socket.timeout:
                    pass
            s.close()
        except OSError:
            attack.stop.wait(0.1)


def agent_phases(target):
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
    peer = [f"127.0.0.{2 + i % 16}" for i in range(200)]

    def slowloris(attack, source):
        while not attack.stop.is_set():
            try:
                s = target.connect(source=source)
                for b in head:
                    if attack.stop.wait(1):
                        break
                    s.sendall(bytes([b]))
                s.close()
            except OSError:
                attack.stop.wait(0.1)

    return [
        ("idle-slowloris", lambda a: [a.spawn(hold_idle, a, target, p) for p in peer]
         + [a.spawn(slowloris, a, p) for p in peer]),
        ("big-heads-8m", lambda a: [a.spawn(big_head, a, target, 8 * 1024 * 1024) for _ in range(4)]),
    ]


def phases(target, workers, max_connections, tls, rate):
    pod = json.loads(FILTER)["Pod"]
    explain60k = json.dumps({"Pod": pod, "NodeNames": [f"unknown-{i}" for i in range(60000)]}).encode()
    slow_head = b"POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    slow_chunks = b"%x\r\n" % len(FILTER) + FILTER + b"\r\n0\r\n\r\n"
    expect_head = (b"POST /filter HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(FILTER))
    explain_req = (b"POST /debug/explain HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                   % len(explain60k)) + explain60k
    n = 2 * workers
    return [
        ("slow-chunked", lambda a: [a.spawn(trickle, a, target, slow_head, slow_chunks) for _ in range(n)]),
        ("slow-expect", lambda a: [a.spawn(trickle, a, target, expect_head, FILTER) for _ in range(n)]),
        ("slow-readers", lambda a: [a.spawn(never_read, a, target, explain_req, 4) for _ in range(n)]),
        ("big-heads", lambda a: [a.spawn(big_head, a, target, 100 * 1024) for _ in range(4)]
         + [a.spawn(big_head, a, target, 64 * 1024 * 1024, True)]),
        ("explain-1m", lambda a: [a.spawn(post_names, a, target, req)
                                  for req in [names_request(b"/debug/explain", 1000000)] * 3]),
        ("conn-flood", lambda a: [a.spawn(flood, a, target, max_connections)]),
        ("filter-1m", lambda a: [a.spawn(post_names, a, target, req)
                                 for req in [names_request(b"/filter", 1200000, "nd-")] * 2]),
        ("filter-1m-8", lambda a: [a.spawn(post_names, a, target, req)
                                   for req in [names_request(b"/filter", 1200000, "nd-")] * 8]),
        ("peers-flood", lambda a: [a.settled.clear(), a.spawn(peers_flood, a, target,
                                                           [f"127.0.0.{i}" for i in range(2, 7)], 256)]),
    ] + ([("tls-handshakes", lambda a: [a.spawn(handshakes, a, target, rate / 4)
                                        for _ in range(4)])] if tls else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("extender", help="gapless-extender, or gapless-agent with --agent")
    ap.add_argument("--agent", action="store_true", help="attack gapless-agent's status server")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--max-connections", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--after", type=float, default=60, help="seconds to wait before the last RSS")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds after each attack before its RSS is taken (0: not taken)")
    ap.add_argument("--handshakes", type=float, default=400, help="tls-handshakes: per second")
    ap.add_argument("--tls-key", choices=["rsa", "ec"], default="rsa",
                    help="the certificate's key: RSA 2048 or ECDSA P-256 (cheaper handshakes)")
    ap.add_argument("--only", default="", help="comma-separated phases to run (default: all)")
    args = ap.parse_args()
    port, probe_port = free_port(), free_port()
    cmd = [args.extender, "--listen", f"127.0.0.1:{port}", "--workers", str(args.workers),
           "--max-connections", str(args.max_connections),
           "--probe-listen", f"127.0.0.1:{probe_port}"]
    tmp = tempfile.mkdtemp()
    if args.agent:
        with open(f"{tmp}/kubeconfig", "w") as f:  # nothing listens there: publishing fails
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n"
                    "  cluster: {server: 'http://127.0.0.1:9'}\ncontexts:\n- name: c\n"
                    "  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {}\n")
        cmd = [args.extender, "--listen", f"127.0.0.1:{port}", "--kubeconfig", f"{tmp}/kubeconfig",
               "--node-name", "probe-node", "--nvml-library", f"{tmp}/no-nvml.so", "--no-usage"]
    elif args.tls:
        key = ["-newkey", "rsa:2048"] if args.tls_key == "rsa" else [
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        subprocess.run(["openssl", "req", "-x509", *key, "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-keyout", f"{tmp}/k.pem", "-out", f"{tmp}/c.pem"],
                       check=True, capture_output=True)
        cmd += ["--tls-cert", f"{tmp}/c.pem", "--tls-key", f"{tmp}/k.pem"]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    target = Target(port, args.tls)
    probes = target if args.agent else Target(probe_port, False)  # the kubelet's side
    for t in (target, probes):
        for _ in range(100):
            try:
                t.connect().close()
                break
            except OSError:
                time.sleep(0.1)
    filter_req = (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(FILTER)) + FILTER
    health_req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

    idle, base = {}, {}

    def load():
        with open("/proc/loadavg") as f:
            return f.read().split()[0]

    def cuts():
        """gapless_http_connections_cut_total by reason, from the probe listener's /metrics."""
        out = {}
        try:
            s = probes.connect(timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            _, body = read_answer(s)
            s.close()
        except (OSError, ConnectionError):
            return out
        for line in body.decode().splitlines():
            if line.startswith("gapless_http_connections_cut_total{"):
                reason = line.split('reason="')[1].split('"')[0]
                out[reason] = float(line.split()[-1])
        return out

    def new_verb_connection():
        """What a client that connects to --listen now gets for /healthz."""
        try:
            s = target.connect(timeout=5)
            s.sendall(health_req)
            status, _ = read_answer(s)
            s.close()
            return status.decode()
        except (OSError, ConnectionError) as e:
            return f"refused ({type(e).__name__})"

    def measure(name, conn=None):
        """One line; returns the targets the phase missed (unloaded: the baseline)."""
        if args.agent:
            h = timed_calls(probes, args.seconds, health_req, fresh=True)
            m = rss(proc.pid)
            line = (f"{name:15s} healthz n={len(h):5d} p50={pct(h, .5):8.2f} p99={pct(h, .99):8.2f} "
                    f"max={max(h):8.2f} ms")
            f = []
        else:
            res = {}
            t = threading.Thread(target=lambda: res.setdefault(
                "h", timed_calls(probes, args.seconds, health_req, fresh=True)))
            t.start()
            before = cuts()
            f = timed_calls(target, args.seconds, filter_req, conn=conn)
            t.join()
            fresh = new_verb_connection() if name == "peers-flood" else ""
            h = res["h"]
            m = rss(proc.pid)
            line = (f"{name:14s} {'https' if args.tls else 'http':5s} filter n={len(f):5d} "
                    f"p50={pct(f, .5):8.2f} p99={pct(f, .99):8.2f} ms  healthz p99={pct(h, .99):8.2f} "
                    f"max={max(h):8.2f} ms")
            cut = {k: v - before.get(k, 0) for k, v in cuts().items() if v > before.get(k, 0)}
            if cut:
                line += "  cut: " + ",".join(f"{k}={v:.0f}" for k, v in sorted(cut.items()))
            if fresh:
                line += f"  new --listen connection: {fresh}"
        print(f"{line}  RSS={m['VmRSS']} MiB peak={m['VmHWM']} MiB  load={load()}", end="", flush=True)
        if not idle:
            idle.update(m)
            base["p99"] = pct(f, .99) if f else 0
            print(flush=True)
            return []
        missed = []
        if max(h) > 100:
            slow = sum(1 for x in h if x > 100)
            missed.append(f"healthz max {max(h):.0f} ms > 100 ({slow} of {len(h)} calls)")
        if f and pct(f, .99) > max(20, 2 * base["p99"]):
            missed.append(f"filter p99 {pct(f, .99):.1f} ms > {max(20, 2 * base['p99']):.1f}")
        return missed

    try:
        measure("unloaded")
        only = set(filter(None, args.only.split(",")))
        all_phases = (agent_phases(target) if args.agent
                      else phases(target, args.workers, args.max_connections, args.tls,
                                  args.handshakes))
        for name, start in all_phases:
            if only and name not in only:
                continue
            conn = None if args.agent else target.connect()  # kube-scheduler's kept connection
            attack = Attack()
            start(attack)
            time.sleep(1)  # let the attack take hold
            attack.settled.wait(60)
            missed = measure(name, conn)
            if attack.held:
                print(f"  held {attack.held} connections", end="")
            if attack.done:
                print(f"  {attack.done / (time.time() - attack.started):.0f}/s", end="")
            attack.end()
            if args.settle:
                time.sleep(args.settle)
                m = rss(proc.pid)
                print(f"  after {args.settle:.0f} s: RSS={m['VmRSS']} MiB", end="")
                if m["VmRSS"] - idle["VmRSS"] > 50:
                    missed.append(f"RSS {m['VmRSS']} MiB > idle {idle['VmRSS']} + 50")
            print("  targets: " + ("; ".join(missed) if missed else "met"), flush=True)
        time.sleep(args.after)
        m = rss(proc.pid)
        print(f"after {args.after:.0f} s: RSS={m['VmRSS']} MiB peak={m['VmHWM']} MiB")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
