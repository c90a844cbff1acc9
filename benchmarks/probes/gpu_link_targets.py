"""Issue 38's targets for Links and Routers, measured in one run with their peers of that run.

Run on 4 GPUs (``nvidia-h200-x4``), from the repository root::

    python benchmarks/probes/gpu_link_targets.py --json link_targets.json

It runs ``groute topo packets`` (256 MiB buffer; packets of 4 KiB, 64 KiB, 1 MiB and 16 MiB),
``groute topo broadcast`` (1 MiB and 16 MiB from device 0 to the 3 others) and PBF on 1e9
items with first-available routing on 1 and 4 devices (each answer verified against NumPy),
then prints one line per target: the figure, the peer it is judged against (one plain copy,
the kernel push, raw copies, direct copies, one device) from the same run, the ratio and
whether the target is met. The full topo tables follow (``--markdown`` writes them too).
``--quick`` runs smaller sizes and PBF on 1e8 items (a smoke test of the script).

``--part-bytes 4096,16384,65536`` adds a sweep of the device-initiated Link's share of a packet
per block (:meth:`groute.runtime.device_link.DeviceLink.grid_shape`) at 64 KiB, 1 MiB and 16 MiB
packets, beside the kernel push. ``--before DIR`` first runs the same measurement from another
checkout (``DIR``, e.g. ``git archive <commit> | tar -x -C .before``: its own copy of this
script, with the options both know; ``BEFORE_COMMIT`` labels it), then this one, and prints the
targets side by side::

    python benchmarks/probes/gpu_link_targets.py --before .before --repeat 5 --pbf-size 1e8
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

KIB, MIB = 1 << 10, 1 << 20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--backend", default="cuda", help="cpu: a run of the script's own code on CPU "
                                                     "virtual devices (tiny sizes; no figures)")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--pbf-size", type=float, default=1e9)
    p.add_argument("--pbf-segment", type=int, default=1 << 24)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    p.add_argument("--part-bytes", default=None,
                   help="comma list: sweep the device Link's least share of a packet per block")
    p.add_argument("--before", default=None, metavar="DIR",
                   help="first run this measurement from the checkout DIR, then compare")
    args = p.parse_args(argv)
    before = _run_before(args) if args.before else None
    from groute import Context
    from groute.topology import report
    from groute.topology.runner import run_benchmarks
    from groute.topology.settings import default_settings

    def context():
        return Context(args.devices, backend=args.backend, timeout=120)

    def progress(line):
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    cpu = args.backend == "cpu"
    largest = 16 * MIB if cpu else 64 * MIB if args.quick else 256 * MIB
    packets = default_settings(args.backend, sizes=[largest], repeat=args.repeat,
                               packet_sizes=[4 * KIB, 64 * KIB, MIB, 16 * MIB])
    if cpu:
        packets.max_packets = 8
    bcast = default_settings(args.backend, sizes=[MIB, 16 * MIB], repeat=args.repeat)
    machine, results = run_benchmarks(["packets"], context, packets, progress)
    results += run_benchmarks(["broadcast"], context, bcast, progress)[1]
    pbf = _pbf(args, progress)
    rows = _targets({r.name: r for r in results}, pbf)
    print(f"Issue 38 targets on {machine.get('label')}: {args.devices} x "
          f"{', '.join(machine.get('device_models', []))}, commit {machine.get('project_commit')}")
    width = max((len(r[0]) for r in rows), default=0)
    for what, value, peer, ratio, goal, met in rows:
        print(f"  {what:<{width}}  {value:>14}  vs {peer:<34} {ratio:>7}  goal {goal:<8} "
              f"{'MET' if met else 'MISSED'}")
    for res in results:
        print()
        print(report.render_result(res))
    sweep = _part_sweep(args, context, progress) if args.part_bytes else []
    targets = [dict(zip(("what", "value", "peer", "ratio", "goal", "met"), r)) for r in rows]
    if before is not None:
        _print_side_by_side(before, targets)
    document = {"machine": machine, "targets": targets, "part_sweep": sweep, "before": before,
                "pbf": pbf, "benchmarks": [r.to_dict() for r in results]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1, default=str)
    if args.markdown:
        doc = report.to_document(machine, packets, results)
        with open(args.markdown, "w") as f:
            f.write(report.markdown(doc, results))
    return 0 if all(r.status == "ok" for r in results) else 1


def _run_before(args) -> dict | None:
    """This measurement from the checkout ``args.before`` (its own script and groute), with the
    options every version of the script knows; its JSON document, or None when it failed."""
    tree = Path(args.before).resolve()
    script = tree / "benchmarks/probes/gpu_link_targets.py"
    out = Path(os.environ.get("OUT", "/tmp")) / "link_targets_before.json"
    options = ["--devices", str(args.devices), "--backend", args.backend, "--repeat", str(args.repeat),
               "--pbf-size", str(args.pbf_size), "--pbf-segment", str(args.pbf_segment),
               "--json", str(out)] + (["--quick"] if args.quick else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tree)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                       if x and Path(x).resolve() != Path.cwd().resolve()]))
    env["GROUTE_COMMIT"] = os.environ.get("BEFORE_COMMIT", "before")   # its label in the report
    print(f"=== before: {script} ===", flush=True)
    done = subprocess.run([sys.executable, str(script), *options], cwd=tree, env=env)
    print(f"=== before: exit status {done.returncode}; now this checkout ===", flush=True)
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        print(f"before: no results ({exc})")
        return None


def _print_side_by_side(before: dict, targets: list) -> None:
    """Each target's figure before and now (the before run's own ratio and verdict)."""
    old = {t["what"]: t for t in before.get("targets", [])}
    width = max([len(t["what"]) for t in targets] + [10])
    print(f"\nIssue 38 targets, before ({before.get('machine', {}).get('project_commit')}) and now:")
    for t in targets:
        b = old.get(t["what"])
        was = f"{b['value']} ({b['ratio']}, {'met' if b['met'] else 'missed'})" if b else "-"
        print(f"  {t['what']:<{width}}  before {was:<36} now {t['value']} ({t['ratio']}, "
              f"{'MET' if t['met'] else 'MISSED'})")


def _part_sweep(args, context, progress) -> list:
    """The device-initiated Link at 64 KiB, 1 MiB and 16 MiB packets for each least share of a
    packet per block in ``args.part_bytes``, beside the kernel push of the same bytes."""
    from groute.topology import device_ops
    from groute.topology.packetization import _device_link
    from groute.topology.settings import default_settings, format_bytes
    from groute.topology.timing import Clock, measure
    shares = [int(float(x)) for x in args.part_bytes.split(",")]
    packets = [64 * KIB, MIB, 16 * MIB] if args.backend != "cpu" else [4 * KIB]
    settings = default_settings(args.backend, sizes=[max(packets) * 16], repeat=args.repeat,
                                packet_sizes=packets)
    ctx = context()
    rows = []
    try:
        a, b = ctx.devices[:2]
        words = settings.largest // 4
        src, dst = device_ops.device_buffer(a, words), device_ops.device_buffer(b, words)
        device_ops.fill_pattern(src, seed=7)
        expected = device_ops.to_numpy(src)
        clock, place = Clock(a, ctx.timeout), b.new_stream("place")
        reps = dict(repeat=settings.repeat, warmup=settings.warmup)
        try:
            for packet in packets:
                pw = packet // 4
                total = min(words, pw * settings.max_packets)
                s, d = src[:total], dst[:total]
                push = measure(clock, lambda start, s=s, d=d: device_ops.device_copy(clock.stream, d, s),
                               gate=True, **reps).median
                for share in shares:
                    t = _device_link(ctx, clock, place, s, d, pw, settings.link_buffers(packet),
                                     expected[:total], reps, f"sweep-{packet}-{share}", part_bytes=share).median
                    rows.append({"packet_bytes": packet, "part_bytes": share, "gbps": total * 4 / t / 1e9,
                                 "push_gbps": total * 4 / push / 1e9})
                    progress(f"part sweep: P={format_bytes(packet)} share>={format_bytes(share)}: "
                             f"{rows[-1]['gbps']:.1f} GB/s, push {rows[-1]['push_gbps']:.1f} GB/s")
        finally:
            clock.close()
            b.release_stream(place)
    finally:
        ctx.shutdown()
    print("\ndevice Link by least share of a packet per block (GB/s, % of the kernel push):")
    for r in rows:
        print(f"  {format_bytes(r['packet_bytes']):>8} packets, shares >= {format_bytes(r['part_bytes']):>8}: "
              f"{r['gbps']:7.1f} GB/s  {r['gbps'] / r['push_gbps']:5.0%}")
    return rows


def _pbf(args, progress) -> dict:
    """PBF, first-available, on 1 and all devices; each verified against NumPy."""
    from groute import Context
    from groute.apps.pbf import parse_predicate, pbf
    size = int(1e5 if args.backend == "cpu" else 1e8 if args.quick else args.pbf_size)
    progress(f"pbf: {size:,} items")
    data = np.random.default_rng(0).integers(-2**31, 2**31 - 1, size, dtype=np.int32)
    pred = parse_predicate("even")
    expected = np.sort(data[pred.numpy(data)])
    out = {"items": size, "segment": args.pbf_segment}
    for k in (1, args.devices):
        with Context(k, backend=args.backend, timeout=120) as ctx:
            pbf(data[:args.pbf_segment], pred, ctx=ctx, segment_size=args.pbf_segment)   # warm-up
            res = pbf(data, pred, ctx=ctx, segment_size=args.pbf_segment)
        ok = bool(res.values.size == expected.size and np.array_equal(np.sort(res.values), expected))
        out[k] = {"seconds": res.time_s, "verified": ok, "elements_per_device": res.stats["elements_per_device"]}
        progress(f"pbf: {k} devices {res.time_s * 1e3:.1f} ms, {'verified' if ok else 'MISMATCH'}")
    return out


def _targets(by, pbf) -> list:
    rows = []

    def gbps(res, **where):
        found = res.select(**where)
        return found[0]["gbps"] if found else float("nan")

    p = by.get("packets")
    if p is not None and p.status == "ok":
        for size, goal in ((64 * KIB, 0.5), (MIB, 0.85), (16 * MIB, 0.85)):
            copy = gbps(p, method="one copy", packet_bytes=size)
            for method in ("Link, batched", "Link"):
                link = gbps(p, method=method, packet_bytes=size)
                rows.append((f"host {method}, {size // KIB} KiB packets", f"{link:.1f} GB/s",
                             f"one copy {copy:.1f} GB/s", f"{link / copy:.0%}", f">= {goal:.0%}",
                             link >= goal * copy))
        host = p.select(method="Link", packet_bytes=4 * KIB)[0]["host_us_per_packet"]
        raw = p.select(method="raw packets", packet_bytes=4 * KIB)[0]["host_us_per_packet"]
        rows.append(("host Link, host time per 4 KiB packet", f"{host:.1f} us",
                     f"raw copies {raw:.1f} us/packet", f"{host / raw:.1f}x", "<= 8 us", host <= 8))
        for size in (64 * KIB, MIB, 16 * MIB):
            push, dev = gbps(p, method="kernel push", packet_bytes=size), gbps(p, method="device Link", packet_bytes=size)
            rows.append((f"device Link, {size // KIB} KiB packets", f"{dev:.1f} GB/s",
                         f"kernel push {push:.1f} GB/s", f"{dev / push:.0%}", ">= 85%", dev >= 0.85 * push))
        dev = gbps(p, method="device Link", packet_bytes=4 * KIB)
        push = gbps(p, method="kernel push", packet_bytes=4 * KIB)
        rows.append(("device Link, 4 KiB packets", f"{dev:.1f} GB/s", f"kernel push {push:.1f} GB/s",
                     f"{dev / push:.0%}", ">= 10 GB/s", dev >= 10))
    b = by.get("broadcast")
    if b is not None and b.status == "ok":
        for size in (MIB, 16 * MIB):
            direct = b.select(method="copies", bytes=size)[0]["seconds"]
            for method in ("Router", "device Links"):
                found = b.select(method=method, bytes=size)
                if found:
                    t = found[0]["seconds"]
                    host = f" (host {found[0]['host_us']:.0f} us)" if "host_us" in found[0] else ""
                    rows.append((f"broadcast by {method}, {size // MIB} MiB", f"{t * 1e3:.3f} ms{host}",
                                 f"direct copies {direct * 1e3:.3f} ms", f"{t / direct:.1f}x", "<= 2x",
                                 t <= 2 * direct))
    ks = sorted(k for k in pbf if isinstance(k, int))
    if len(ks) == 2:
        one, many = pbf[ks[0]], pbf[ks[1]]
        speedup = one["seconds"] / many["seconds"]
        rows.append((f"PBF {pbf['items']:.0e} items, {ks[1]} devices", f"{many['seconds'] * 1e3:.1f} ms",
                     f"1 device {one['seconds'] * 1e3:.1f} ms", f"{speedup:.2f}x", ">= 3x",
                     speedup >= 3 and one["verified"] and many["verified"]))
    return rows


if __name__ == "__main__":
    sys.exit(main())
