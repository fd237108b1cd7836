#!/usr/bin/env python3
"""Checks a `trainshim report --html` page rendered by headless Chromium
(tests/integration/test_report_html.sh).

  report_html_check.py render PAGE OUTDIR    -> OUTDIR/dom.html, console.txt, shot.png
  report_html_check.py demo PAGE REPORT.json OUTDIR
  report_html_check.py absent PAGE OUTDIR
  report_html_check.py pool PAGE REPORT.json OUTDIR
  report_html_check.py consistent PAGE REPORT.json
  report_html_check.py offload PAGE REPORT.txt OUTDIR
  report_html_check.py data PAGE             -> prints the embedded JSON block
  report_html_check.py loadms PAGE           -> ms from navigation to the load event

demo: renders the page, fails on any console message, reads each section's
figures back from the DOM (data-k / data-v attributes) and compares them
with `trainshim report --format json` of the same logs, and checks that a
screenshot is not blank.  absent: a log without GEMM, NCCL and CUPTI
records still shows every section, each saying in one line what is absent.
"""
import html.parser
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tslog  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "chromium")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
errors = []


def fail(msg):
    errors.append(msg)


def eq(what, got, want):
    if got != want:
        fail(f"{what}: page shows {got!r}, the JSON report says {want!r}")


def close(what, got, want, tol=1e-6):
    if want is None or got is None:
        eq(what, got, want)
    elif abs(float(got) - float(want)) > tol * max(1.0, abs(float(want))):
        fail(f"{what}: page shows {got!r}, the JSON report says {want!r}")


def chromium(args, page):
    """Runs headless Chromium on page; returns (stdout, console lines of the page)."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0"] + args + \
              ["file://" + os.path.abspath(page)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    return p.stdout, console


def render(page, out):
    dom, console = chromium(["--dump-dom"], page)
    _, console2 = chromium(["--window-size=1000,1600", "--screenshot=" + os.path.join(out, "shot.png")], page)
    with open(os.path.join(out, "dom.html"), "w") as f:
        f.write(dom)
    with open(os.path.join(out, "console.txt"), "w") as f:
        f.write("\n".join(console + console2))
    return dom, console + console2


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.kids, self.text = tag, dict(attrs), parent, [], ""

    def all(self):
        yield self
        for k in self.kids:
            yield from k.all()

    def find(self, pred):
        return [n for n in self.all() if pred(n)]

    def text_all(self):
        return self.text + "".join(k.text_all() for k in self.kids)


class Tree(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.kids.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.kids.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text += data


def parse(dom):
    t = Tree()
    t.feed(dom)
    return t.root


def value(v):
    if v == "null":
        return None
    try:
        return int(v)
    except ValueError:
        return float(v)


def figures(node, key):
    return [value(n.attrs["data-v"]) for n in node.all() if n.attrs.get("data-k") == key]


def one(node, key, what):
    v = figures(node, key)
    if len(v) < 1:
        fail(f"{what}: no {key} figure on the page")
        return None
    return v[0]


def section(root, sid):
    s = root.find(lambda n: n.tag == "section" and n.attrs.get("id") == sid)
    if len(s) != 1:
        fail(f"section #{sid}: found {len(s)}")
        return Node("section", {}, None)
    return s[0]


def log_blocks(sec):
    return sec.find(lambda n: n.tag == "div" and "log" in n.attrs.get("class", "").split())


def png_pixels(path):
    """The RGB pixels of an 8-bit RGB or RGBA PNG (what Chromium writes),
    decoded with zlib: chunks, then each scanline's filter undone."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big"), body[8], body[9]
            if depth != 8 or ctype not in (2, 6) or body[12]:
                raise ValueError(f"PNG depth {depth} colour type {ctype} interlace {body[12]}: not decoded here")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, px = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        px.extend(bytes(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return px


def png_colors(path):
    """Distinct colours and the share of non-white pixels of the screenshot."""
    px = png_pixels(path)
    nonwhite = sum(1 for p in px if p != b"\xff\xff\xff")
    return len(set(px)), nonwhite / max(1, len(px))


def check_console(console):
    for l in console:
        fail("console message: " + l)


def check_screenshot(out):
    shot = os.path.join(out, "shot.png")
    if not os.path.exists(shot):
        fail("no screenshot")
        return
    ncol, share = png_colors(shot)
    if ncol < 50 or share < 0.05:
        fail(f"screenshot looks blank: {ncol} colours, {share:.1%} non-white pixels")


def check_ranks(root, runs):
    sec = section(root, "ranks")
    rows = sec.find(lambda n: n.tag == "tr" and "data-rank" in n.attrs)
    eq("RANKS rows", len(rows), len(runs))
    for row, r in zip(rows, runs):
        what = f"RANKS rank {row.attrs['data-rank']}"
        eq(what + " pid", one(row, "pid", what), r["run"]["pid"])
        eq(what + " duration", one(row, "duration_ns", what), r["run"]["duration_ns"])
        for k in ("peak_allocated_bytes", "peak_reserved_bytes", "alloc_calls", "free_calls"):
            eq(f"{what} {k}", one(row, k, what), r["memory"][k])
        for k in ("h2d_bytes", "d2h_bytes"):
            eq(f"{what} {k}", one(row, k, what), r["copies"][k])
        if "compute" in r:
            eq(what + " gemm_flops", one(row, "gemm_flops", what), r["compute"]["gemm_flops"])
            eq(what + " steps", one(row, "steps", what), r["compute"]["steps"])
            close(what + " mfu", one(row, "mfu", what), r["compute"]["mfu"])
    run = section(root, "run")
    eq("RUN pids", figures(run, "pid"), [r["run"]["pid"] for r in runs])
    eq("RUN records", figures(run, "records"), [r["run"]["records"] for r in runs])


def check_memory(root, runs):
    blocks = log_blocks(section(root, "memory"))
    eq("memory blocks", len(blocks), len(runs))
    for b, r in zip(blocks, runs):
        m, what = r["memory"], f"memory rank {b.attrs.get('data-rank')}"
        devs = b.find(lambda n: n.attrs.get("data-device") is not None and n.tag == "div")
        if len(devs) != 1:
            fail(f"{what}: {len(devs)} device charts, the demo has one device per rank")
            continue
        d = devs[0]
        eq(what + " device peak", one(d, "peak_allocated_bytes", what), m["peak_allocated_bytes"])
        eq(what + " peak reserved", one(d, "peak_reserved_bytes", what), m["peak_reserved_bytes"])
        if not d.find(lambda n: n.attrs.get("data-mark") == "peak"):
            fail(what + ": no peak marker")
        # the panel lists the largest live blocks at the peak, with their sites
        eq(what + " highest point of the peak's interval", one(d, "bucket_allocated_bytes", what),
           m["peak_allocated_bytes"])
        sizes = figures(d, "block_bytes")
        if not sizes or sum(sizes) > m["peak_allocated_bytes"] or sizes != sorted(sizes, reverse=True):
            fail(f"{what}: largest live blocks at the peak: {sizes}")
        sites = set(m.get("top_sites") and [s["stack_id"] for s in m["top_sites"]] or [])
        shown = figures(d, "site")
        if not sites or not shown or shown[0] not in sites:
            fail(f"{what}: the largest block's site {shown[:1]} is not a top site {sorted(sites)}")
        frames = [n.text_all() for n in d.find(lambda n: n.attrs.get("data-k") == "site")]
        func = m["top_sites"][0]["frames"][0]["function"] if m.get("top_sites") else None
        if func and not any(func in f for f in frames):
            fail(f"{what}: no listed block shows the top site's frame {func!r}")
        hits = d.find(lambda n: n.tag == "rect" and "hit" in n.attrs.get("class", ""))
        if len(hits) < 10:
            fail(f"{what}: {len(hits)} hover targets")


def check_steps_gemm(root, runs):
    sb = log_blocks(section(root, "steps"))
    gb = log_blocks(section(root, "gemm"))
    for s, g, r in zip(sb, gb, runs):
        c, what = r["compute"], f"rank {s.attrs.get('data-rank')}"
        eq(what + " steps", one(s, "steps", what), c["steps"])
        close(what + " steady MFU", one(s, "steady_mfu", what), c["step_detail"]["steady_mfu"])
        charts = s.find(lambda n: n.tag == "svg")
        eq(what + " step charts", len(charts), 2)
        if charts:
            bars = charts[0].find(lambda n: n.tag == "rect" and n.attrs.get("data-bucket") is not None)
            eq(what + " step bars", len(bars), len(c["step_detail"]["list"]))
        eq(what + " gemm_calls", one(g, "gemm_calls", what), c["gemm_calls"])
        eq(what + " gemm_flops", one(g, "gemm_flops", what), c["gemm_flops"])
        rows = g.find(lambda n: n.tag == "tr" and "data-shape" in n.attrs)
        want = c["shapes"][:20]
        eq(what + " shapes", [x.attrs["data-shape"] for x in rows], [f"{x['m']}x{x['n']}x{x['k']}" for x in want])
        eq(what + " shape FLOPs", figures(g, "flops"), [x["flops"] for x in want])
        eq(what + " misaligned flags", figures(g, "misaligned"), [1 if x["pad"] else 0 for x in want])
        close(what + " misaligned FLOP share", one(g, "misaligned_flop_share", what), c["misaligned"]["flop_share"])


def check_copies(root, runs):
    for b, r in zip(log_blocks(section(root, "copies")), runs):
        cp, what = r["copies"], f"copies rank {b.attrs.get('data-rank')}"
        for k in ("h2d_bytes", "d2h_bytes", "d2d_bytes"):
            eq(f"{what} {k}", one(b, k, what), cp[k])
        eq(what + " converted", one(b, "converted_bytes", what), cp.get("converted_bytes", 0))
        hd = cp["h2d_bytes"] + cp["d2h_bytes"]
        close(what + " pageable share", one(b, "pageable_share", what),
              (cp["h2d_pageable_bytes"] + cp["d2h_pageable_bytes"]) / hd if hd else 0)
        for s in ("h2d", "d2h", "pageable", "converted"):
            if not b.find(lambda n, s=s: n.attrs.get("data-series") == s):
                fail(f"{what}: no {s} series drawn")


def check_nccl(root, runs, total):
    sec = section(root, "nccl")
    for i, r in enumerate(runs):
        rank = r["run"]["rank"]
        for op in r.get("nccl", {}).get("ops", []):
            cells = sec.find(lambda n: n.attrs.get("data-k") == "busbw_gbps" and n.attrs.get("data-rank") == str(rank)
                             and n.parent.attrs.get("data-op") == op["op"])
            if len(cells) != 1:
                fail(f"nccl rank {rank} {op['op']}: {len(cells)} busbw cells")
                continue
            close(f"nccl rank {rank} {op['op']} busbw", value(cells[0].attrs["data-v"]), op["busbw_gbps"])
    steps = total.get("rank_accounting", {}).get("steps", [])
    if not steps:
        fail("the JSON report has no straggler steps for the demo's ranks")
    eq("straggler per step", figures(sec, "slowest_rank"), [s["slowest_rank"] for s in steps])


def check_timeline(root, runs):
    for b, r in zip(log_blocks(section(root, "timeline")), runs):
        g, what = r["gpu"], f"timeline rank {b.attrs.get('data-rank')}"
        if g.get("source") != "cupti":
            fail(what + ": the demo log has no CUPTI records")
            continue
        close(what + " busy share", one(b, "busy_share", what), g["busy_share"])
        eq(what + " idle gaps", one(b, "idle_gap_count", what), g["idle_gap_count"])
        eq(what + " kernels", one(b, "kernel_count", what), g["kernel_count"])
        eq(what + " longest gap", one(b, "longest_idle_gap_ns", what), g["longest_idle_gap_ns"])
        eq(what + " gap marks", len(b.find(lambda n: n.attrs.get("data-mark") == "gap")), len(g.get("idle_gaps", [])))


def check_advice(root, runs):
    sec = section(root, "advice")
    items = sec.find(lambda n: n.tag == "li")
    want = [a["text"] for r in runs for a in r.get("advice", [])]
    if not want:
        fail("the demo's JSON report has no advice")
    got = [re.sub(r"^\[rank \d+\] ", "", n.text) for n in items]
    eq("advice lines", got, want)
    # each line links to its rank's part of the section behind it
    ids = {n.attrs["id"]: n for n in root.find(lambda n: "id" in n.attrs)}
    for n in items:
        links = n.find(lambda k: k.tag == "a")
        target = ids.get(links[0].attrs.get("href", "")[1:]) if len(links) == 1 else None
        sec = target if target is not None and target.tag == "section" else target.parent if target else None
        if sec is None or sec.tag != "section" or sec.attrs.get("id") != n.attrs.get("data-section") or \
                not target.find(lambda k: k.tag == "svg" or k.tag == "table"):
            fail(f"advice line without a link to its chart: {n.text[:60]!r}")


def replay_memory(path, span, buckets, top):
    """Allocated bytes per device from the log's own alloc/free records,
    replayed here in time order: {device: (highest per bucket, peak, the
    `top` largest blocks live at the peak)}, the page's memory series
    worked out independently of the C code."""
    seq, evs, t0 = 0, [], 0
    for typ, rec in tslog.records(path):
        t = tslog.time_ns(rec)
        if typ == 1:
            t0 = struct.unpack_from("<Q", rec, 48)[0]
        elif typ == 4 and len(rec) >= 64:
            _, dev, ptr, size, _, res = struct.unpack_from("<iiQQQi", rec, 24)
            if not res and ptr:
                evs.append((t, seq, ptr, size, dev))
        elif typ == 5 and len(rec) >= 56:
            ptr, res = struct.unpack_from("<Q", rec, 32)[0], struct.unpack_from("<i", rec, 48)[0]
            if not res and ptr:
                evs.append((t, seq, ptr, None, None))
        seq += 1
    evs.sort()
    live, cur, out = {}, {}, {}
    hi = {}
    def bucket(t):
        return 0 if t <= t0 else min(buckets - 1, (t - t0) * buckets // span)
    last = -1
    for t, _, ptr, size, dev in evs:
        b = bucket(t)
        for d in hi:
            for k in range(last + 1, b + 1):
                hi[d][k] = cur[d]
        last = max(last, b)
        if ptr in live:
            od, osz = live.pop(ptr)
            cur[od] -= osz
        if size is None:
            continue
        d = dev if 0 <= dev < 8 else 0
        if d not in hi:
            hi[d], cur[d], out[d] = [0] * buckets, 0, [0, []]
            for k in range(0, b + 1):
                hi[d][k] = 0
        live[ptr] = (d, size)
        cur[d] += size
        hi[d][b] = max(hi[d][b], cur[d])
        if cur[d] > out[d][0]:
            out[d] = [cur[d], sorted((s for dd, s in live.values() if dd == d), reverse=True)[:top]]
    for d in hi:
        for k in range(last + 1, buckets):
            hi[d][k] = cur[d]
    return {d: (hi[d], out[d][0], out[d][1]) for d in hi}


def check_memory_replay(L, what, buckets, top):
    ms = L["memory_series"]
    want = replay_memory(L["run"]["log"], ms["span_ns"], buckets, top)
    eq(what + " devices", [v["device"] for v in ms["devices"]], sorted(want))
    for v in ms["devices"]:
        if v["device"] not in want:
            continue
        hi, peak, blocks = want[v["device"]]
        eq(f"{what} device {v['device']} peak", v["peak_allocated_bytes"], peak)
        eq(f"{what} device {v['device']} highest per bucket", v["allocated_max"], hi)
        b = next(i for i, x in enumerate(v["allocated_max"]) if x == peak)
        snap = v["snapshots"][v["snapshot_of_bucket"][b]]
        eq(f"{what} device {v['device']} largest blocks at the peak", [k["bytes"] for k in snap["blocks"]], blocks)


def check_data(page, report):
    """The embedded series add up to the JSON report's totals."""
    d = json.loads(data_block(page))
    rep = json.load(open(report, encoding="utf-8"))
    runs = rep["ranks"] if "ranks" in rep else [rep]
    eq("logs in the data", len(d["logs"]), len(runs))
    for L, r in zip(d["logs"], runs):
        what, cs, cp = "data " + L["run"]["log"], L["copy_series"], r["copies"]
        for k in ("h2d", "d2h", "d2d"):
            eq(f"{what} {k} bytes summed over buckets", sum(cs[k]), cp[k + "_bytes"])
        eq(what + " pageable", sum(cs["pageable"]), cp["h2d_pageable_bytes"] + cp["d2h_pageable_bytes"])
        eq(what + " converted", sum(cs["converted"]), cp.get("converted_bytes", 0))
        devs = L["memory_series"]["devices"]
        if len(devs) == 1:
            eq(what + " highest bucket = peak", max(devs[0]["allocated_max"]), r["memory"]["peak_allocated_bytes"])
        for dv in devs:
            eq(what + " peak", max(dv["allocated_max"]), dv["peak_allocated_bytes"])
            for b, i in enumerate(dv["snapshot_of_bucket"]):
                if dv["snapshots"][i]["live_bytes"] != dv["allocated_max"][b]:
                    fail(f"{what} bucket {b}: snapshot live bytes {dv['snapshots'][i]['live_bytes']} != "
                         f"highest point {dv['allocated_max'][b]}")
                    break
        if r["gpu"].get("source") == "cupti":
            eq(what + " GPU busy time", sum(L["gpu_series"]["busy_ns"]), r["gpu"]["busy_ns"])
        else:
            eq(what + " GPU series without CUPTI", L["gpu_series"], None)
        eq(what + " advice", [a["text"] for a in L["advice"]], [a["text"] for a in r.get("advice", [])])
        check_memory_replay(L, what, d["buckets"], d["top_blocks"])


def demo(page, report, out):
    dom, console = render(page, out)
    check_console(console)
    root = parse(dom)
    if not root.find(lambda n: n.tag == "body" and n.attrs.get("data-rendered") == "1"):
        fail("the page script did not finish (no data-rendered on body)")
    rep = json.load(open(report, encoding="utf-8"))
    runs = rep["ranks"] if "ranks" in rep else [rep]
    check_ranks(root, runs)
    check_memory(root, runs)
    check_steps_gemm(root, runs)
    check_copies(root, runs)
    check_nccl(root, runs, rep.get("total", {}))
    check_timeline(root, runs)
    check_advice(root, runs)
    check_screenshot(out)
    check_data(page, report)
    check_click(page)


def absent(page, out):
    dom, console = render(page, out)
    check_console(console)
    root = parse(dom)
    for sid in ("run", "ranks", "memory", "steps", "gemm", "copies", "nccl", "timeline", "offload", "advice"):
        section(root, sid)
    for sid in ("steps", "gemm", "nccl", "timeline", "offload"):
        lines = section(root, sid).find(lambda n: n.tag == "p" and "absent" in n.attrs.get("class", ""))
        if not lines or not lines[0].text.strip():
            fail(f"section #{sid} of a log without its records does not say so")
    mem = section(root, "memory")
    if mem.find(lambda n: "absent" in n.attrs.get("class", "")):
        fail("memory section says absent for a log with allocations")
    # tests/golden/rank0.tslog: one failed 64 GiB cudaMalloc at 40 ms, drawn and listed
    eq("OOM marks", len(mem.find(lambda n: n.attrs.get("data-mark") == "oom")), 1)
    eq("OOM count", figures(mem, "oom_count"), [1])
    oom = mem.find(lambda n: n.attrs.get("data-k") == "oom_count")
    if not oom or "OOM at 0.040 s: 64.00 GiB requested" not in oom[0].text:
        fail("OOM line: " + (oom[0].text if oom else "none"))
    check_screenshot(out)


def pool_oom(page, report, out):
    """A run whose pool refused 1 TiB: the OOM point with the pool's figures,
    and the pool's reserved peak on the chart."""
    dom, console = render(page, out)
    check_console(console)
    mem = section(parse(dom), "memory")
    rep = json.load(open(report, encoding="utf-8"))
    d = json.loads(data_block(page))["logs"][0]["memory_series"]
    pool = [o for o in d["ooms"] if o["kind"] == "pool"]
    if len(pool) != 1 or pool[0]["requested_bytes"] != 1 << 40 or "reserved_bytes" not in pool[0] or \
            len(d["ooms"]) != 1:  # the failed cudaMalloc of the same request is not a second OOM
        fail(f"pool OOMs in the data: {d['ooms']}")
    dev0 = [v for v in d["devices"] if v["device"] == 0]
    if not dev0 or dev0[0]["peak_reserved_bytes"] is None or \
            dev0[0]["peak_reserved_bytes"] > rep["memory"]["peak_reserved_bytes"]:
        fail(f"device 0 reserved peak {dev0[:1]}, the report's {rep['memory']['peak_reserved_bytes']}")
    if not mem.find(lambda n: n.attrs.get("data-mark") == "oom"):
        fail("no OOM mark on the memory chart")
    if not mem.find(lambda n: n.attrs.get("data-series") == "reserved"):
        fail("no reserved line on the memory chart")
    lines = [n.text for n in mem.find(lambda n: n.attrs.get("data-k") == "oom_count")]
    if not any("1.00 TiB requested (pool, reserved" in t for t in lines):
        fail(f"OOM line: {lines}")


def human_bytes(b):
    """tslog_human_bytes(): the text report's sizes."""
    units, v, u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"], float(b), 0
    while v >= 1024 and u < 6:
        v, u = v / 1024, u + 1
    return f"{b} B" if u == 0 else f"{v:.2f} {units[u]}"


def offload(page, report, out):
    """The OFFLOAD section's figures read from the DOM equal the text
    report's OFFLOAD lines (tools/report/report_offload.c) of the same log."""
    dom, console = render(page, out)
    check_console(console)
    sec = section(parse(dom), "offload")
    text = open(report, encoding="utf-8").read()
    m = re.search(r"\n== OFFLOAD ==\n(.*?)(\n\n|\Z)", text, re.S)
    if not m:
        fail("the text report has no OFFLOAD section")
        return
    lines = m.group(1).split("\n")
    h = re.search(r"peak host-backed memory (.+?) \(now (.+?)\); (\d+) pages backed by the host", lines[0])
    p = re.search(r"to the host (\d+), back to the device (\d+); failed moves \(rolled back\) (\d+); "
                  r"managed allocations (\d+)", lines[1])
    if not h or not p:
        fail(f"OFFLOAD lines not understood: {lines[:2]}")
        return
    eq("peak host-backed", human_bytes(one(sec, "peak_host_bytes", "offload")), h.group(1))
    eq("host-backed at end", human_bytes(one(sec, "host_bytes", "offload")), h.group(2))
    eq("pages backed at OOM", one(sec, "oom_host_pages", "offload"), int(h.group(3)))
    for i, k in enumerate(("demoted_pages", "promoted_pages", "failed_moves", "managed_allocs")):
        eq(k, one(sec, k, "offload"), int(p.group(i + 1)))
    want = [(e.group(1), int(e.group(2)), e.group(3), e.group(4)) for e in
            (re.match(r"  (pause|resume) +tag (\d+) +(.+?) in +([0-9.]+) ms$", l) for l in lines[2:]) if e]
    rows = sec.find(lambda n: n.tag == "tr" and "data-kind" in n.attrs)
    got = []
    for r in rows:
        tag, b, ns = figures(r, "tag"), figures(r, "bytes"), figures(r, "duration_ns")
        got.append((r.attrs["data-kind"], tag[0], human_bytes(b[0]), f"{ns[0] / 1e6:.3f}"))
    eq("pauses and resumes", got, want)
    adv = [l.strip()[len("advice: "):] for l in lines if l.startswith("  advice: ")]
    shown = [n.text.strip()[len("advice: "):] for n in sec.find(lambda n: n.attrs.get("data-k") == "offload_advice")]
    eq("offload advice", shown, adv)
    check_screenshot(out)


def data_block(page):
    s = open(page, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="trainshim-data">\n(.*?)</script>', s, re.S)
    if not m:
        sys.exit("no trainshim-data block in " + page)
    return m.group(1)


def with_probe(page, probe):
    """Console lines of a copy of page with a script run after its load."""
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "page.html")
        with open(page, encoding="utf-8") as f, open(copy, "w", encoding="utf-8") as g:
            g.write(f.read().replace("</body>", "<script>addEventListener('load', () => setTimeout(() => {"
                                     + probe + "}, 0));</script>\n</body>"))
        return chromium(["--dump-dom"], copy)[1]


def check_click(page):
    """Hovering a moment of the first memory chart shows a tip; clicking it
    lists that bucket's largest live blocks in the chart's panel."""
    d = json.loads(data_block(page))
    dv = d["logs"][0]["memory_series"]["devices"][0]
    # a moment whose highest point differs from the peak's (shown at first)
    b = next((i for i, v in enumerate(dv["allocated_max"]) if v != dv["peak_allocated_bytes"]), 0)
    probe = ("const dev = document.querySelector('#memory div.device');"
             "const r = dev.querySelector('rect.hit[data-bucket=\"%d\"]');"
             "r.dispatchEvent(new MouseEvent('mousemove', {clientX: 50, clientY: 50}));"
             "const tip = document.getElementById('tip');"
             "r.dispatchEvent(new MouseEvent('click'));"
             "const p = dev.querySelector('[data-panel=blocks]');"
             "console.log('probe ' + (tip.style.display === 'block' && tip.textContent.includes('allocated')) + ' ' +"
             "p.querySelector('[data-k=bucket_allocated_bytes]').getAttribute('data-v') + ' ' +"
             "p.querySelectorAll('[data-k=block_bytes]').length + ' ' + r.getAttribute('class'));") % b
    lines = [l for l in with_probe(page, probe) if '"probe ' in l]
    snap = dv["snapshots"][dv["snapshot_of_bucket"][b]]
    want = f"probe true {dv['allocated_max'][b]} {len(snap['blocks'])} hit sel"
    if len(lines) != 1 or want not in lines[0]:
        fail(f"hover and click on bucket {b}: {lines}, want {want!r}")


def loadms(page):
    """Navigation start to the end of the load event, measured by the page
    itself (a copy with a probe appended after the report's script)."""
    probe = ("<script>addEventListener('load', () => setTimeout(() => console.log('loadms ' + "
             "performance.getEntriesByType('navigation')[0].loadEventEnd.toFixed(1)), 0));</script>")
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "page.html")
        with open(page, encoding="utf-8") as f, open(copy, "w", encoding="utf-8") as g:
            g.write(f.read().replace("</body>", probe + "\n</body>"))
        _, console = chromium(["--dump-dom"], copy)
    for l in console:
        m = re.search(r'"loadms ([0-9.]+)"', l)
        if m:
            return float(m.group(1))
    sys.exit("no load time: " + "\n".join(console))


def main():
    cmd = sys.argv[1]
    if cmd == "render":
        render(sys.argv[2], sys.argv[3])
        return 0
    if cmd == "data":
        sys.stdout.write(data_block(sys.argv[2]))
        return 0
    if cmd == "loadms":
        print(f"{loadms(sys.argv[2]):.1f}")
        return 0
    if cmd == "demo":
        demo(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "consistent":
        check_data(sys.argv[2], sys.argv[3])
    elif cmd == "pool":
        pool_oom(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "absent":
        absent(sys.argv[2], sys.argv[3])
    elif cmd == "offload":
        offload(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "console":  # self-check: a page that throws must be caught
        _, console = chromium(["--dump-dom"], sys.argv[2])
        print("\n".join(console))
        return 0 if console else 1
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
