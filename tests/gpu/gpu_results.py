"""Collects make gpu-check's per-check result files (OUT/checks/NAME.res) into
OUT/results.json and OUT/results.md and prints the markdown table.

A .res file has tab-separated lines: fig NAME VALUE UNIT GOAL VERDICT,
note TEXT, verdict STATUS, exit RC, stderr TEXT.  A check's status is the
worst of its verdict lines and figure verdicts (PASS when nothing says
otherwise).  Exit status: 1 when a check failed, errored or timed out."""
import json
import os
import sys

ORDER = ["build", "probe", "semantics", "copies", "cupti", "demo", "alloc", "vmm", "hostvmm", "copy_threads",
         "torch_gpt", "nccl", "torch_gpt_async", "replay"]
RANK = {"PASS": 0, "EMULATED": 1, "SKIP": 2, "NEEDS_DEVICE": 3, "FAIL": 4, "TIMEOUT": 5, "ERROR": 6}


def read_check(path, name):
    c = {"name": name, "status": "PASS", "figures": [], "notes": [], "stderr": []}
    for line in open(path, errors="replace"):
        parts = line.rstrip("\n").split("\t")
        kind = parts[0]
        if kind == "fig":
            parts += [""] * (6 - len(parts))
            f = dict(zip(["name", "value", "unit", "goal", "verdict"], parts[1:6]))
            c["figures"].append(f)
            if f["verdict"] == "FAIL" and RANK[c["status"]] < RANK["FAIL"]:
                c["status"] = "FAIL"
        elif kind == "verdict" and parts[1] in RANK:
            if RANK[parts[1]] > RANK[c["status"]]:
                c["status"] = parts[1]
        elif kind == "note":
            c["notes"].append("\t".join(parts[1:]))
        elif kind == "exit":
            c["exit"] = int(parts[1])
        elif kind == "stderr":
            c["stderr"].append("\t".join(parts[1:]))
    return c


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def main():
    out, mode, elapsed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    names = [n[:-4] for n in os.listdir(os.path.join(out, "checks")) if n.endswith(".res")]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    checks = [read_check(os.path.join(out, "checks", n + ".res"), n) for n in names]
    need = [c["name"] for c in checks if c["status"] in ("NEEDS_DEVICE", "EMULATED")]
    bad = [c["name"] for c in checks if c["status"] in ("FAIL", "ERROR", "TIMEOUT")]
    result = {"suite": "trainshim gpu-check", "mode": mode, "elapsed_s": elapsed, "checks": checks,
              "failed": bad, "need_device": need if mode == "emu" else []}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = ["# trainshim gpu-check (%s mode, %d s)" % ("GPU" if mode == "gpu" else "no GPU: emulator", elapsed), "",
             "| check | status | figure | value | unit | goal | verdict |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        first = True
        rows = c["figures"] or [{"name": "", "value": "", "unit": "", "goal": "", "verdict": ""}]
        for f in rows:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                c["name"] if first else "", c["status"] if first else "", md_escape(f["name"]),
                md_escape(f["value"]), md_escape(f["unit"]), md_escape(f["goal"]), f["verdict"]))
            first = False
        for n in c["notes"]:
            lines.append("| | | note | %s | | | |" % md_escape(n))
        if c["stderr"]:
            lines.append("| | | stderr tail | `%s` | | | |" % md_escape(" / ".join(c["stderr"][-6:]))[:900])
    lines.append("")
    if bad:
        lines.append("failed: " + " ".join(bad))
    if mode == "emu":
        lines.append("no GPU: %d checks need a device (%s)" % (len(need), " ".join(need)))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
