#!/usr/bin/env python3
"""The GPU map page (GET /ui) in a real headless Chromium against a running extender.

Usage: gpu_map_browser_test.py GAPLESS_EXTENDER [--large N] [--screenshot PNG]

Demo run: starts the extender on its built-in demo cluster, binds pods of every kind (whole,
share, MIG, gpushare) and filters one that fits nowhere, then opens the page and checks that it
loads with no console error, exception or failed load; shows every node of /debug/state with
its GPUs, each GPU's holders as the allocation records say; picks up a bind made while it is
open without a reload; opens the explanation of the waiting pod; narrows to a searched pod.
--large N: a second extender on a generated N-node cluster (three GPU models, every third node
half full); the page must draw every group with its overview and first page. The time the page
took to draw (performance.now() in the page) is printed, never asserted.
--screenshot: writes a PNG of the demo map (docs/img/gpu-map.png is made this way).

Exits 77 (skipped) only when no chromium binary is installed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, find_chromium  # noqa: E402


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read())


class Extender:
    def __init__(self, binary, cluster=None):
        self.log = tempfile.TemporaryFile()
        args = [binary, "--listen", "127.0.0.1:0"] + (["--cluster", cluster] if cluster else [])
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline, port = time.time() + 120, None
        while port is None:
            self.log.seek(0)
            m = re.search(rb"http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                port = int(m.group(1))
            elif self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                raise RuntimeError("extender did not start: " + self.log.read().decode())
            else:
                time.sleep(0.1)
        self.base = f"http://127.0.0.1:{port}"
        while True:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("extender never became ready")
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still loading a large cluster: nothing to keep
            self.proc.kill()
            self.proc.wait()


def pod(name, uid, limits, ns="default"):
    return {"metadata": {"name": name, "namespace": ns, "uid": uid},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}


def place(base, p, node):
    """filter then bind, as kube-scheduler would; the bind's Error ("" when bound)."""
    f = post(base, "/filter", {"Pod": p, "Nodes": None, "NodeNames": [node]})
    if node not in (f.get("NodeNames") or []):
        return f"filter refused: {f}"
    m = p["metadata"]
    return post(base, "/bind", {"PodName": m["name"], "PodNamespace": m["namespace"],
                                "PodUID": m["uid"], "Node": node})["Error"]


def expected_holders(state):
    """(node, gpu index) -> set of "ns/name" from the allocation records of /debug/state."""
    out = {}
    for a in state["allocations"]:
        r = a["record"]
        for g in r.get("gpus", []):
            out.setdefault((r["node"], g["index"]), set()).add(a["pod"])
        for m in r.get("mig", []):
            out.setdefault((r["node"], m["gpu"]), set()).add(a["pod"])
    return out


SHOWN_HOLDERS = """(() => {
  const out = {};
  for (const card of document.querySelectorAll('.node')) {
    out[card.dataset.node] = [...card.querySelectorAll('.gpu')].map(
      (c) => c.dataset.holders ? c.dataset.holders.split(',').sort() : []);
  }
  return out;
})()"""


def check_holders(browser, state):
    shown = browser.evaluate(SHOWN_HOLDERS)
    want = expected_holders(state)
    names = [n["name"] for n in state["nodes"]]
    assert sorted(shown) == sorted(names), f"nodes shown {sorted(shown)} != {sorted(names)}"
    for n in state["nodes"]:
        cells = shown[n["name"]]
        assert len(cells) == len(n["gpus"]), f"{n['name']}: {len(cells)} GPU cells"
        for i, cell in enumerate(cells):
            expect = sorted(want.get((n["name"], i), set()))
            assert cell == expect, f"{n['name']} GPU {i}: shows {cell}, records say {expect}"


def demo_run(binary, chromium, screenshot):
    ext = Extender(binary)
    browser = None
    try:
        base = ext.base
        for p, node in ((pod("train-0", "uid-map-1", {"nvidia.com/gpu": "2"}, "ml"), "h100-nvs-01"),
                        (pod("infer-0", "uid-map-2", {"gapless.io/gpu-memory": "20480",
                                                      "gapless.io/gpu-compute": "300"}, "serve"),
                         "a100-02"),
                        (pod("infer-1", "uid-map-3", {"gapless.io/gpu-memory": "10240",
                                                      "gapless.io/gpu-compute": "500"}, "serve"),
                         "a100-02"),
                        (pod("notebook-0", "uid-map-4", {"nvidia.com/mig-3g.40gb": "1"}, "lab"),
                         "a100-mig-01"),
                        (pod("legacy-0", "uid-map-5", {"aliyun.com/gpu-mem": "10"}), "gpushare-01"),
                        (pod("train-1", "uid-map-6", {"nvidia.com/gpu": "4"}, "ml"), "dgx1-v100-01")):
            err = place(base, p, node)
            assert err == "", f"{p['metadata']['name']} on {node}: {err}"
        # A pod no node can take: it waits, and the page lists it.
        big = pod("huge-0", "uid-map-big", {"nvidia.com/gpu": "16"}, "ml")
        names = [n["name"] for n in get(base, "/debug/state")["nodes"]]
        post(base, "/filter", {"Pod": big, "Nodes": None, "NodeNames": names})

        browser = Browser(chromium)
        browser.open_page()
        browser.navigate(base + "/ui?interval=300")  # the redirect to ui/ is part of the test
        browser.wait_for("window.gaplessMap && window.gaplessMap.renders >= 1")
        assert browser.evaluate("location.pathname") == "/ui/"
        state = get(base, "/debug/state")
        check_holders(browser, state)
        pending = browser.evaluate("[...document.querySelectorAll('#pending li')].map(l => l.dataset.uid)")
        assert "uid-map-big" in pending, f"waiting pods shown: {pending}"
        strip = browser.evaluate("Object.fromEntries([...document.querySelectorAll('[data-count]')]"
                                 ".map(b => [b.dataset.count, Number(b.textContent)]))")
        held = sum(1 for n in state["nodes"] for g in n["gpus"]
                   if g["healthy"] and (g["used"]["whole"] or g["used"]["sharedPods"] or g["used"]["gpushareUnits"]
                   or g["used"]["migSliceMask"]))
        assert strip["allocated"] == held, f"strip {strip}, {held} GPUs in use"

        # A bind while the page is open: shown at the next poll, with no reload.
        browser.evaluate("window.__sameDocument = 1")
        err = place(base, pod("train-2", "uid-map-7", {"nvidia.com/gpu": "1"}, "ml"), "t4-01")
        assert err == "", err
        browser.wait_for("document.querySelector('.node[data-node=\"t4-01\"] .gpu[data-holders=\"ml/train-2\"]') !== null")
        assert browser.evaluate("window.__sameDocument") == 1, "the page reloaded"
        check_holders(browser, get(base, "/debug/state"))

        # The waiting pod's explanation.
        browser.evaluate("document.querySelector('#pending li[data-uid=\"uid-map-big\"]').click()")
        browser.wait_for("document.getElementById('explain').dataset.loaded === 'uid-map-big'")
        text = browser.evaluate("document.getElementById('explain').innerText")
        assert f"0 of {len(names)} nodes pass" in text, text
        assert "fewer than 16" in text or "16" in text, text

        # Search narrows the map to the nodes holding the pod, and marks its GPUs.
        browser.evaluate("{ const s = document.getElementById('search'); s.value = 'ml/train-0';"
                         " s.dispatchEvent(new Event('input')); }")
        shown = browser.evaluate("[...document.querySelectorAll('.node')].map(n => n.dataset.node)")
        assert shown == ["h100-nvs-01"], f"search shows {shown}"
        assert browser.evaluate("document.querySelectorAll('.gpu.match').length") == 2
        if screenshot:
            browser.evaluate("{ const s = document.getElementById('search'); s.value = '';"
                             " s.dispatchEvent(new Event('input'));"
                             " document.getElementById('explain').hidden = true; }")
            browser.screenshot(screenshot, 1400, 900)
            print(f"screenshot: {screenshot}")
        time.sleep(0.5)  # one more poll after the last action, so its errors are seen too
        assert not browser.errors, f"browser errors: {browser.errors}"
        print(f"demo: {len(names)} nodes, holders match the records, bind shown live, "
              f"explain and search work; drawn in {browser.evaluate('window.gaplessMap.lastRenderMs'):.1f} ms")
    finally:
        if browser:
            browser.close()
        ext.stop()


def large_cluster(path, count):
    """count nodes of three models (8x H100 NVSwitch, 8x A100, 4x T4) as a NodeList with
    topology annotations, and every third node holding a whole-GPU pod on half its GPUs."""
    models = [("NVIDIA-H100-80GB-HBM3", 81559, 8, True), ("NVIDIA-A100-SXM4-40GB", 40960, 8, True),
              ("Tesla-T4", 15360, 4, False)]
    items = []
    for i in range(count):
        model, mem, n, nvlink = models[i % 3]
        name = f"node-{i:05d}"
        gpus = [{"index": g, "uuid": f"GPU-{i:08d}-{g:04d}", "model": model, "memoryMiB": mem,
                 "healthy": not (i % 97 == 0 and g == 0)} for g in range(n)]
        links = [{"a": a, "b": b, "type": "NVLink", "count": 12} for a in range(n)
                 for b in range(a + 1, n)] if nvlink else []
        topo = json.dumps({"version": 1, "gpus": gpus, "links": links})
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "annotations": {"gapless.io/gpu-topology": topo}}})
        if i % 3 == 0:
            half = n // 2
            record = {"v": 1, "node": name,
                      "gpus": [{"index": g, "uuid": gpus[g]["uuid"]} for g in range(half)]}
            items.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"job-{i}", "namespace": f"team-{i % 7}",
                                       "uid": f"uid-{i}",
                                       "annotations": {"gapless.io/allocation": json.dumps(record)}},
                          "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {
                              "limits": {"nvidia.com/gpu": str(half)}}}]},
                          "status": {"phase": "Running"}})
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)


def large_run(binary, chromium, count):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cluster.json")
        large_cluster(path, count)
        ext = Extender(binary, path)
    browser = None
    try:
        data = get(ext.base, "/ui/map.json")
        assert len(data["nodes"]) == count, f"map.json has {len(data['nodes'])} nodes"
        browser = Browser(chromium)
        browser.open_page()
        browser.navigate(ext.base + "/ui/?interval=1000")
        browser.wait_for("window.gaplessMap && window.gaplessMap.renders >= 1", timeout=60)
        first = browser.evaluate("window.gaplessMap.firstRenderMs")
        draw = browser.evaluate("window.gaplessMap.lastRenderMs")
        fetched = browser.evaluate("window.gaplessMap.fetchMs")
        groups = browser.evaluate("[...document.querySelectorAll('.group')].map(g => [g.dataset.group,"
                                  " g.querySelectorAll('canvas.overview').length,"
                                  " g.querySelectorAll('.node').length])")
        assert len(groups) == 3, f"groups: {groups}"
        for name, canvases, cards in groups:
            assert canvases == 1 and cards == 48, f"group {name}: {canvases} overview, {cards} cards"
        strip = browser.evaluate("Object.fromEntries([...document.querySelectorAll('[data-count]')]"
                                 ".map(b => [b.dataset.count, Number(b.textContent)]))")
        assert strip["allocated"] == data["cluster"]["allocated"] > 0, strip
        browser.wait_for("window.gaplessMap.renders >= 2", timeout=30)  # a poll's redraw too
        redraw = browser.evaluate("window.gaplessMap.lastRenderMs")
        assert not browser.errors, f"browser errors: {browser.errors}"
        print(f"large: {count} nodes, {data['cluster']['gpus']} GPUs, map.json {len(json.dumps(data))} "
              f"bytes: first drawn {first:.0f} ms after navigation start ({fetched:.0f} ms "
              f"fetching and parsing map.json, {draw:.0f} ms drawing); a poll's redraw "
              f"{redraw:.0f} ms")
    finally:
        if browser:
            browser.close()
        ext.stop()


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    binary, large, shot = args[0], None, None
    if "--large" in args:
        large = int(args[args.index("--large") + 1])
    if "--screenshot" in args:
        shot = args[args.index("--screenshot") + 1]
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no chromium binary (apt-get install chromium); the GPU map's browser test "
              "did not run")
        sys.exit(77)
    demo_run(binary, chromium, shot)
    if large:
        large_run(binary, chromium, large)


if __name__ == "__main__":
    main()
