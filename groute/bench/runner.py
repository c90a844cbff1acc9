"""Running the suite: every (app, graph, device count, mode) case, its peers, its verdict.

Per graph: load/generate it once (and start its METIS splits in worker processes,
:mod:`.partitions`); per app: compute the reference once, time the peers once; then the cases,
device count outermost; per case: build the solver (which partitions and uploads, with the
graph layer caching the partition), warm up, time ``repeat`` runs (the apps' own ``AppResult.time_s``: CUDA events or a
synchronised clock), and verify the first and the last result. One Context per device count is
reused across cases. A case that raises is recorded as ERROR and the suite goes on; a wrong
answer is FAIL and is never given a time.
"""
from __future__ import annotations

import datetime as _dt
import gc
import logging
import math
import os
import threading
import time

import numpy as np

from . import floor as floor_model
from .targets import evaluate as evaluate_targets
from ..machine import describe_machine
from .peers import PeerSkipped, check_peer_answer, free_gpu_memory, prepare_peer
from .partitions import PARTITION_PREFETCH_MIN_ARCS, PartitionPrefetch
from .memory import add_ratios, case_probe, host_peak_while
from .progress import Progress
from .fmt import fmt_seconds
from .report import jsonable
from .specs import spec_for
from .suite import (APPS, ERROR, FAIL, NA, OK, SKIP, WEIGHT_SEED,
                    SOURCES_RULE, BenchConfig, case_modes, check_reference, choose_source,
                    choose_sources, reference_where)
from .references import cached_reference, reference_label
from .verify import verify

log = logging.getLogger(__name__)

SCHEMA = "groute-bench/1"



def run_suite(config: BenchConfig, *, command: str = "", solvers: dict | None = None,
              progress: bool = True, stream=None, on_update=None) -> dict:
    """Run the whole suite; returns the JSON-ready results (see docs/BENCHMARKS.md).

    ``solvers`` maps app names to solver classes, replacing the ones in ``apps/`` (tests use it
    to inject a deliberately wrong solver). ``on_update(results)`` is called after every
    finished step with the results so far (``finished`` still None), so a run cut off by a
    time limit leaves its completed cases behind.
    """
    return SuiteRun(config, command=command, solvers=solvers or {}, progress=progress,
                    stream=stream, on_update=on_update).run()


class SuiteRun:
    def __init__(self, config: BenchConfig, *, command, solvers, progress, stream, on_update=None):
        self.on_update = on_update
        from groute.runtime.context import resolve_backend
        self.config = config
        self.command = command
        self.backend = resolve_backend(config.backend)
        self.partition = config.partition      # auto: decided per graph (split_method)
        check_reference(config.reference, self.backend)
        self.classes: dict[str, object] = {}
        #: app -> why its cases cannot run (no reference to check them against)
        self.unavailable: dict[str, str] = {}
        for app in config.apps:
            if spec_for(app).reference is None:
                self.unavailable[app] = (f"{app} has no reference to check it against (no "
                                         f"BenchSpec in groute/bench/specs.py)")
            else:
                self.classes[app] = solvers.get(app) or APPS[app].solver
        self.contexts: dict[int, object] = {}
        self._order: dict[int, tuple] = {}      # id(case) -> its place in results["cases"]
        self.progress = Progress(self._count_steps(), stream=stream, enabled=progress)
        self.results = {
            "schema": SCHEMA, "command": command, "config": config.to_dict(),
            "backend": self.backend, "partition": self.partition,
            "started": _now(), "finished": None, "elapsed_s": None,
            "machine": describe_machine(), "bandwidth": None,
            "apps": {app: ({"status": "available"} if app in self.classes
                           else {"status": NA, "note": self.unavailable[app]})
                     for app in config.apps},
            "graphs": [], "references": [], "peers": [], "cases": [],
            "running": None,
        }

    def _count_steps(self) -> int:
        c = self.config
        per_graph = 0
        for app in c.apps:
            per_graph += len(case_modes(APPS[app], c.modes)) * (len(c.devices) + c.auto_devices)
            if app in self.classes:
                per_graph += len(c.peers)
        return per_graph * len(c.graphs)

    # the whole run ---------------------------------------------------------------------------------
    def run(self) -> dict:
        t0 = time.perf_counter()
        try:
            self._measure_bandwidth()
            for spec in self.config.graphs:
                self._run_graph(spec)
        finally:
            for k in list(self.contexts):
                self._drop_context(k)
            self.progress.close()
        self.results["running"] = None
        self.results["finished"] = _now()
        self.results["elapsed_s"] = time.perf_counter() - t0
        self.results["targets"] = evaluate_targets(self.results)
        return self.results

    def _measure_bandwidth(self):
        try:
            ctx = self._context(self._first_count())
            bw = floor_model.measure_copy_bandwidth(ctx.devices[0])
            bw["device"] = ctx.devices[0].name
            self.results["bandwidth"] = bw
            self.progress.note(f"device copy bandwidth on {bw['device']}: "
                               f"{bw['bytes_per_s'] / 1e9:.0f} GB/s (read + write)")
        except Exception as exc:
            log.warning("could not measure device copy bandwidth: %s", exc)
            self.results["bandwidth"] = {"error": f"{type(exc).__name__}: {exc}"}

    # one graph ------------------------------------------------------------------------------------------
    def _run_graph(self, spec: str):
        info = {"spec": spec}
        self.results["graphs"].append(info)
        self.progress.note(f"loading {spec} ...")
        self._begin(f"loading {spec}")
        try:
            t0 = time.perf_counter()
            graph, load_memory = host_peak_while(lambda: _load(spec))
            info["load_s"] = time.perf_counter() - t0
            source, rule = choose_source(graph, spec)
        except Exception as exc:
            info["error"] = f"{type(exc).__name__}: {exc}"
            self.progress.note(f"{spec}: could not load: {info['error']}")
            for app in self.config.apps:
                self._record_graph_failure(app, spec, f"graph did not load: {info['error']}")
            return
        info.update(name=getattr(graph, "name", spec), vertices=int(graph.num_vertices),
                    arcs=int(graph.num_edges), directed=bool(graph.directed),
                    weighted=graph.weights is not None, source=source, source_rule=rule,
                    source_file_id=_file_id(graph, source))
        info["load_memory"] = add_ratios(load_memory, graph.num_vertices, graph.num_edges,
                                         graph.weights is not None)
        self.progress.note(f"{spec}: {graph.num_vertices:,} vertices, {graph.num_edges:,} arcs "
                           f"({info['load_s']:.1f} s); source {source} ({rule})")
        weighted = loopless = None
        runs = []                   # (app, the graph it runs on, its source(s) or None)
        for app in self.config.apps:
            spec_app = APPS[app]
            app_graph = graph
            if not spec_app.self_loops:
                if loopless is None:
                    loopless = graph.remove_self_loops()
                    if loopless is not graph:
                        info["self_loops_removed"] = int(graph.num_edges - loopless.num_edges)
                app_graph = loopless
            if spec_app.directed:
                app_graph = app_graph.as_directed()
            if spec_app.weighted:
                if weighted is None:
                    try:
                        weighted = graph if graph.weights is not None else self._add_weights(graph)
                    except Exception as exc:
                        self._record_graph_failure(app, spec, f"could not add weights: {exc}")
                        continue
                    info["weights"] = ("from the file" if graph.weights is not None
                                       else f"with_weights(seed={WEIGHT_SEED}): integers 1..64")
                app_graph = weighted
            app_source = source if spec_app.needs_source else None
            sources = spec_for(app).sources
            if sources:
                app_source = choose_sources(app_graph, sources)
                info.setdefault("sources", {})[app] = dict(
                    count=int(app_source.size), rule=SOURCES_RULE,
                    first=[int(v) for v in app_source[:8]])
            runs.append((app, app_graph, app_source))
        where = reference_where(self.config.reference, self.backend, graph.num_edges)
        splits = self._prefetch_partitions(spec, graph, [app for app, _, _ in runs
                                                          if app in self.classes])
        try:
            prefetched = self._prefetch_references(spec, runs, where, graph.num_edges)
            ready = []      # (app, graph, source, reference, peers, floor bytes); every app's
                            # reference is kept until the graph is done (grid:4900: 4 x 24M)
            for app, app_graph, app_source in runs:
                prepared = self._prepare_app(app, spec, app_graph, app_source,
                                             self._where(app, where), prefetched.get(app))
                if prepared is not None:
                    ready.append((app, app_graph, app_source) + prepared)
            split_needed = any(APPS[entry[0]].takes_partition for entry in ready)
            if not split_needed:
                splits.close()          # the apps that take one could not run
            # device count outermost: the one-device cases of every app run while the METIS
            # splits for more devices are still being computed
            for k in self.config.devices:
                if split_needed and k in splits:
                    splits.wait(k, self.progress)
                for app, app_graph, app_source, ref, peers, fb in ready:
                    for mode in case_modes(APPS[app], self.config.modes):
                        case = self._run_case(app, spec, app_graph, app_source, ref, k, mode)
                        self._add_floor_and_ratios(case, fb, peers, app_graph)
                        self._record_case(case)
            if self.config.auto_devices:
                for app, app_graph, app_source, ref, peers, fb in ready:
                    for mode in case_modes(APPS[app], self.config.modes):
                        case = self._auto_case(app, spec, app_graph, app_source, ref, mode)
                        self._add_floor_and_ratios(case, fb, peers, app_graph)
                        self._record_case(case)
        finally:
            splits.close()
            if splits.futures:
                info["metis_split_waits_s"] = {str(k): t for k, t in splits.waited.items()}
        del graph, weighted, loopless, runs
        gc.collect()
        free_gpu_memory()

    def split_method(self, graph) -> str:
        """The partition method the cases on ``graph`` split it by.

        Parameters
        ----------
        graph : CSRGraph
            The graph the cases run on.

        Returns
        -------
        str
            ``--partition``, where ``auto`` is the library's choice for this graph
            (:func:`groute.graph.partition.resolve_method`).
        """
        from groute.graph.partition import resolve_method
        return resolve_method(self.partition, graph)

    def _prefetch_partitions(self, spec, graph, apps) -> PartitionPrefetch:
        """Start the METIS splits of a big graph into each device count of the run above one
        (that this machine has), one worker process each, before anything is timed: METIS
        runs on one core and takes most of a minute on the benchmark graphs, while
        the references, the peers and the one-device cases need none. The workers fill the
        graph layer's partition cache, which the cases' solvers then read. ``apps``: those
        that can run. Only where :meth:`_prefetch_pays`."""
        ks = [k for k in self.config.devices if k > 1]   # auto's count: split by its solver
        if self.backend == "cuda":          # no split for cases that will be skipped
            from groute.device import cuda_device_count
            ks = [k for k in ks if k <= cuda_device_count()]
        if not self._prefetch_pays(ks, graph, apps):
            return PartitionPrefetch()
        self.progress.note(f"{spec}: METIS splits into {' and '.join(map(str, ks))} parts, "
                           f"in {len(ks)} worker process{'es' if len(ks) > 1 else ''} ...")
        try:
            return PartitionPrefetch.start(graph, ks)
        except Exception as exc:    # only a speed-up: the cases split the graph themselves
            log.warning("could not start the METIS workers (%s: %s); the cases split %s "
                        "themselves", type(exc).__name__, exc, spec)
            return PartitionPrefetch()

    def _prefetch_pays(self, ks, graph, apps) -> bool:
        """Splits in worker processes pay, and do not disturb what is timed meanwhile, for
        METIS, on graphs of PARTITION_PREFETCH_MIN_ARCS+ arcs, for apps that take a partition,
        on GPUs (CPU virtual devices' cases would share their cores), with a core for each
        worker beside the suite and the reference workers (up to four; scipy peers use one)."""
        return (self.split_method(graph) == "metis" and bool(ks) and self.backend == "cuda"
                and graph.num_edges >= PARTITION_PREFETCH_MIN_ARCS
                and any(APPS[app].takes_partition for app in apps)
                and (os.cpu_count() or 1) >= len(ks) + 5)

    def _prefetch_references(self, spec, runs, where, num_arcs) -> dict:
        """CPU references of a big graph, computed side by side in worker processes before
        anything is timed (on a big graph each takes seconds to tens of seconds, one after the
        other). Only where it pays: CPU references, graphs of REFERENCE_CACHE_MIN_ARCS+ arcs
        (``num_arcs``: the graph's, which its weighted copy shares), two or more apps and at
        least 4 cores. Returns {app: (values, cached, wall_s)} or {app: exception}; an app left
        out computes its reference in _prepare_app."""
        from .references import REFERENCE_CACHE_MIN_ARCS, parallel_references
        jobs = {app: (app, g, src) for app, g, src in runs
                if app in self.classes and self._where(app, where) == "cpu"}
        if (where != "cpu" or len(jobs) < 2 or (os.cpu_count() or 1) < 4
                or num_arcs < REFERENCE_CACHE_MIN_ARCS):
            return {}
        self.progress.note(f"{spec}: computing the references of {', '.join(jobs)} side by side "
                           f"in {len(jobs)} processes ...")
        self._begin(f"the references of {', '.join(jobs)} on {spec}")
        return parallel_references(jobs)

    def _where(self, app, where) -> str:
        """Where ``app``'s reference is computed: ``where``, except that ``--reference auto``
        keeps an app without a plain-CuPy baseline on the CPU."""
        if where == "gpu" and self.config.reference == "auto" and spec_for(app).baseline is None:
            return "cpu"
        return where

    def _add_weights(self, graph):
        """``graph.with_weights(seed=WEIGHT_SEED)``, hashed on GPU 0 when there is one (the graph
        layer's weights are bit-identical on both backends; the GPU hashes a big graph's arcs
        far faster than NumPy)."""
        if self.backend == "cuda":
            try:
                ctx = self._context(self._first_count())
                device = ctx.devices[0]
                with device.on_compute():   # the stream the device graph's to_host reads after
                    return graph.to_device(device).with_weights(seed=WEIGHT_SEED).to_host()
            except Exception as exc:
                log.info("weights on the GPU failed (%s); hashing them on the CPU", exc)
                free_gpu_memory()
        return graph.with_weights(seed=WEIGHT_SEED)

    def _record_graph_failure(self, app, spec, note):
        for k in self.config.devices:
            for mode in case_modes(APPS[app], self.config.modes):
                self._record_case(dict(app=app, graph=spec, devices=k, mode=mode, status=ERROR,
                                       note=note))
        if app in self.classes:
            for peer in self.config.peers:
                self._step(f"{app} {spec} peer {peer}: not run ({note})")

    # one app on one graph -----------------------------------------------------------------------------
    def _prepare_app(self, app, spec, graph, source, where, done=None):
        """The reference and the peers of one app on one graph: ``(reference, peers, floor
        bytes)``, or None when its cases cannot run (recorded here). ``where``: cpu or gpu
        reference (:func:`reference_where`); ``done``: the reference already computed side by
        side (:meth:`_prefetch_references`), or the exception it raised."""
        if app not in self.classes:
            note = self.unavailable[app]
            for k in self.config.devices:
                for mode in case_modes(APPS[app], self.config.modes):
                    self._record_case(dict(app=app, graph=spec, devices=k, mode=mode,
                                           status=NA, note=note))
            return None
        label = reference_label(app, where)
        self.progress.note(f"{app} {spec}: computing the reference ({label}) ...")
        self._begin(f"{app} {spec} reference ({label})")
        try:
            t0 = time.perf_counter()
            if isinstance(done, BaseException):
                raise done
            if done is not None:
                ref, cached, wall = done
            else:
                ref, cached = cached_reference(app, graph, source, where)
                wall = time.perf_counter() - t0
            self.results["references"].append(dict(app=app, graph=spec, where=where, label=label,
                                                    cached=cached, wall_s=wall,
                                                    side_by_side=done is not None))
        except Exception as exc:
            free_gpu_memory()
            self._record_graph_failure(app, spec, f"reference ({label}) failed: "
                                                  f"{type(exc).__name__}: {exc}")
            return None
        peers = [self._run_peer(name, app, spec, graph, source, ref, where)
                 for name in self.config.peers]
        return ref, peers, floor_model.floor_bytes(app, graph)

    def _run_peer(self, name, app, spec, graph, source, ref, where="cpu") -> dict:
        out = dict(app=app, graph=spec, peer=name, label=None, device=None, status=SKIP,
                   note="", time_s=None, min_s=None, max_s=None, repeats=0)
        self.results["peers"].append(out)
        self._begin(f"{app} {spec} peer {name}")
        t_peer = time.perf_counter()
        try:
            peer = prepare_peer(name, app, graph, source,
                                networkx_max_arcs=self.config.networkx_max_arcs,
                                build_budget_s=self.config.max_case_seconds)
            # building its matrix or graph object: untimed, but the run waits for it
            out.update(label=peer.label, device=peer.device, note=peer.note,
                       setup_s=time.perf_counter() - t_peer)
            if name == "cupy" and where == "gpu":  # its check compares the baseline with itself
                out["note"] = "; ".join(filter(None, [peer.note, "computed this graph's reference, "
                                                      "so its check is not independent"]))
            timer = _gpu_wall_time if peer.device == "gpu" else _cpu_wall_time
            times, raw, spent = [], None, 0.0
            runs = self.config.peer_repeat + (1 if peer.device == "gpu" else 0)  # GPU: warm up
            for i in range(runs):
                seconds, raw = timer(peer.run)
                spent += seconds
                if peer.device != "gpu" or i > 0:
                    times.append(seconds)
                elif seconds > self.config.max_case_seconds / 2:
                    # seconds per run (plain-CuPy BFS on a road grid): compiling is a sliver of
                    # the warm-up, so it is the timed run rather than a second one
                    times.append(seconds)
                    out["note"] = "; ".join(filter(None, [out["note"], (
                        f"one run: its warm-up took {seconds:.1f} s, over half the "
                        f"{self.config.max_case_seconds:g} s case budget, and is the time")]))
                    break
                if times and spent > self.config.max_case_seconds:
                    break
            if isinstance(raw, tuple) and len(raw) == 2 and isinstance(raw[1], (int, np.integer)):
                out["iterations"] = int(raw[1])  # (values, iterations) from the power iterations
            kind, values = peer.answer(raw)
            verdict = check_peer_answer(app, kind, values, ref, graph)
            out["verify"] = verdict.to_dict()
            if verdict.ok:
                out.update(status=OK, time_s=float(np.median(times)), min_s=min(times),
                           max_s=max(times), repeats=len(times))
            else:
                out.update(status=FAIL, note=f"wrong answer: {verdict.detail}")
            out["wall_s"] = time.perf_counter() - t_peer
        except PeerSkipped as exc:
            out.update(status=SKIP, note=str(exc))
        except Exception as exc:
            log.info("peer %s on %s/%s failed", name, app, spec, exc_info=True)
            out.update(status=ERROR, note=f"{type(exc).__name__}: {exc}")
            free_gpu_memory()
        shown = fmt_seconds(out["time_s"]) if out["status"] == OK else f"{out['status']}: {out['note']}"
        self._step(f"{app} {spec} peer {name}: {shown}")
        return out

    def _first_count(self) -> int:
        """The device count of the run's first context (one when it runs ``auto`` only)."""
        return (self.config.devices or [1])[0]

    # one case ---------------------------------------------------------------------------------------------
    def _auto_case(self, app, spec, graph, source, ref, mode) -> dict:
        """The case ``devices="auto"`` runs: the count it chooses for ``app`` on ``graph``
        (:func:`groute.engines.device_rule.choose_devices`), marked ``auto`` with the reason.
        A case of that count this run already measured is that case again (not timed twice)."""
        from groute.engines.device_rule import choose_devices
        algorithm = APPS[app]
        choice = choose_devices("auto", backend=self.backend,
                                engine=getattr(self.classes[app], "engine_family", "operators"),
                                num_vertices=graph.num_vertices, num_arcs=graph.num_edges,
                                directed=bool(graph.directed), estimate=algorithm.memory,
                                weighted=algorithm.weighted and graph.weights is not None)
        k = choice.devices
        done = [c for c in self.results["cases"] if c["app"] == app and c["graph"] == spec
                and c["devices"] == k and c.get("mode") == mode and not c.get("auto")
                and len(self.results["graphs"]) == self._order[id(c)][0]]
        case = dict(done[0]) if done else self._run_case(app, spec, graph, source, ref, k, mode)
        case.update(auto=True, devices_why=choice.why)
        return case

    def _run_case(self, app, spec, graph, source, ref, k, mode) -> dict:
        case = dict(app=app, graph=spec, devices=k, mode=mode,
                    partition=self.split_method(graph) if APPS[app].takes_partition and k > 1
                    else None,
                    status=ERROR, note="")
        self._begin(f"{app} {spec} {k} dev" + (f" {mode}" if mode else ""))
        try:
            ctx = self._context(k)
        except _NotEnoughDevices as exc:
            case.update(status=SKIP, note=str(exc))
            return case
        except Exception as exc:
            case["note"] = f"could not create a {k}-device context: {type(exc).__name__}: {exc}"
            return case
        t0 = time.perf_counter()
        try:
            self._time_case(case, ctx, graph, source, ref)
        except Exception as exc:
            log.info("case %s failed", case, exc_info=True)
            case.update(status=ERROR, note=f"{type(exc).__name__}: {exc}")
            self._drop_context(k)  # a failed run may leave the context stopped or half busy
            free_gpu_memory()
        case["wall_s"] = time.perf_counter() - t0  # everything: setup, warm-up, runs, checks
        return case

    def _time_case(self, case, ctx, graph, source, ref):
        app = case["app"]
        algorithm, spec = APPS[app], spec_for(app)
        kwargs = {"ctx": ctx, **spec.options_for(graph)}
        if algorithm.takes_partition:
            kwargs["partition"] = self.split_method(graph)
        if case["mode"] is not None:
            kwargs["mode"] = case["mode"]
        if spec.sources:                        # run() takes the file's ids
            args = ([graph.file_id_of(int(v)) for v in source],)
        elif algorithm.needs_source:
            args = (graph.file_id_of(source),)
        else:
            args = ()
        options = spec.run_options
        probe = case_probe(self.backend, ctx.devices).start()
        solver = None
        try:
            t0 = time.perf_counter()
            solver = self.classes[app](graph, **kwargs)
            case["setup_s"] = time.perf_counter() - t0
            first = solver.run(*args, **options)
            probe.first_run_done()
            verdict = verify(app, first.values, ref, graph)
            case["verify"] = verdict.to_dict()
            if not verdict.ok:
                case.update(status=FAIL, note=f"wrong result: {verdict.detail}")
                return
            for _ in range(self.config.warmup - 1):
                solver.run(*args, **options)
                probe.after_run()
            times, last = ([] if self.config.warmup else [_check_time(first)]), first
            while len(times) < self.config.repeat and sum(times) <= self.config.max_case_seconds:
                last = solver.run(*args, **options)
                probe.after_run()
                times.append(_check_time(last))
            verdict = verify(app, last.values, ref, graph)
            if not verdict.ok:
                case["verify"] = verdict.to_dict()
                case.update(status=FAIL, note=f"wrong result in a timed run: {verdict.detail}")
                return
        finally:
            case["memory"] = self._case_memory(probe.finish(), app, graph, len(ctx.devices))
            close = getattr(solver, "close", None)
            if close is not None:
                close()
        stats = jsonable(dict(last.stats or {}))
        case.update(status=OK, time_s=float(np.median(times)), min_s=float(min(times)),
                    max_s=float(max(times)), times_s=[float(t) for t in times], repeats=len(times),
                    stats=stats, bytes_moved=bytes_moved(stats))
        if len(times) < self.config.repeat:
            case["note"] = (f"{len(times)} of {self.config.repeat} repeats: the timed runs passed "
                            f"the {self.config.max_case_seconds:g} s case budget")
        if algorithm.needs_source:              # a traversal: arcs per second
            case["gteps"] = graph.num_edges / case["time_s"] / 1e9

    def _case_memory(self, memory: dict, app: str, graph, k: int) -> dict:
        """A case's measured peak (:mod:`.memory`) set against the CSR, with the app's own
        estimate of one device's share (its ``memory`` function) beside it. The CSR
        counts weights only for an app that reads them."""
        weighted = graph.weights is not None and (app not in APPS or APPS[app].weighted)
        add_ratios(memory, graph.num_vertices, graph.num_edges, weighted)
        estimate = APPS[app].memory if app in APPS else None
        memory["estimate_bytes"] = None
        if estimate is not None:
            try:
                need = estimate(int(graph.num_vertices), int(graph.num_edges),
                                weighted=weighted, directed=bool(graph.directed), devices=k)
                memory["estimate_bytes"] = int(need.total)
            except Exception as exc:
                log.warning("memory estimate of %s failed: %s", app, exc)
        return memory

    def _add_floor_and_ratios(self, case, fb, peers, graph):
        case["floor_bytes"] = fb
        bw = (self.results["bandwidth"] or {}).get("bytes_per_s")
        case["floor_s"] = fb / bw if bw else None
        if case["status"] != OK:
            return
        if case["floor_s"]:
            case["time_over_floor"] = case["time_s"] / case["floor_s"]
        case["speedup"] = {p["peer"]: p["time_s"] / case["time_s"] for p in peers if p["status"] == OK}

    def _record_case(self, case: dict):
        """Keep ``results["cases"]`` in the tables' order (graph as run, then app, devices and
        mode as the config lists them), whatever order they ran in."""
        cases = self.results["cases"]
        self._order[id(case)] = self._case_order(case)
        cases.append(case)
        cases.sort(key=lambda c: self._order[id(c)])
        mode = f" {case['mode']}" if case.get("mode") else ""
        auto = f" (auto: {case['devices_why']})" if case.get("auto") else ""
        what = f"{case['app']} {case['graph']} {case['devices']} dev{mode}{auto}"
        if case["status"] == OK:
            text = f"{fmt_seconds(case['time_s'])} (median of {case['repeats']})"
            if case.get("speedup", {}).get("scipy"):
                text += f", {case['speedup']['scipy']:.2f}x scipy"
            if case.get("time_over_floor"):
                text += f", {case['time_over_floor']:.1f}x floor"
        else:
            text = f"{case['status']}: {case.get('note', '')}"
        self._step(f"{what}: {text}")

    def _case_order(self, case: dict):
        """Its sort key: cases are recorded while their graph runs (the latest of
        ``results["graphs"]``; a spec given twice runs twice)."""
        c = self.config

        def index(seq, value):
            return seq.index(value) if value in seq else len(seq)
        return (len(self.results["graphs"]), index(c.apps, case["app"]),
                bool(case.get("auto")), case["devices"], index(c.modes, case.get("mode")))

    def _begin(self, what: str):
        """Name the step starting now in ``results["running"]`` and save, so a run killed by a
        time limit says what it was doing (a reference, a peer or a case) and when it began."""
        self.results["running"] = dict(what=what, since=_now(),
                                       elapsed_s=time.perf_counter() - self.progress.t0)
        self._save()

    def _step(self, text: str):
        self.progress.step(text)
        self.results["running"] = None
        self._save()

    def _save(self):
        if self.on_update is not None:
            try:
                self.on_update(self.results)
            except Exception as exc:  # a full disk must not cost the measurements
                log.warning("could not save partial results: %s", exc)

    # contexts -------------------------------------------------------------------------------------------
    def _context(self, k: int):
        ctx = self.contexts.get(k)
        if ctx is not None:
            return ctx
        from groute import Context
        from groute.device import cuda_device_count
        if self.backend == "cuda" and k > cuda_device_count():
            # logical devices share a GPU: their times would report scaling that is not there
            raise _NotEnoughDevices(f"{k} devices asked, this machine has {cuda_device_count()} GPUs "
                                    f"(logical devices are for testing: the bench does not time them)")
        ctx = Context(devices=k, backend=self.backend, timeout=self.config.timeout, logical=False)
        self.contexts[k] = ctx
        return ctx

    def _drop_context(self, k: int):
        """Shut a context down, bounded: a stuck device thread must not hang the whole suite."""
        ctx = self.contexts.pop(k, None)
        if ctx is None:
            return
        closer = threading.Thread(target=ctx.shutdown, name=f"groute-bench-close-{k}", daemon=True)
        closer.start()
        closer.join(ctx.timeout + 5)
        if closer.is_alive():
            log.warning("the %d-device context did not shut down within %.0f s", k, ctx.timeout + 5)


class _NotEnoughDevices(Exception):
    pass


# helpers -------------------------------------------------------------------------------------------------
def _load(spec: str):
    from groute.graph import load_graph
    graph = load_graph(spec)
    to_host = getattr(graph, "to_host", None)
    return to_host() if to_host is not None else graph


def _file_id(graph, v):
    try:
        return int(graph.file_id_of(v))
    except Exception:
        return None


def _check_time(result) -> float:
    t = getattr(result, "time_s", None)
    if not isinstance(t, (int, float, np.floating)) or not math.isfinite(t) or t <= 0:
        raise ValueError(f"the app reported time_s={t!r}; expected positive seconds")
    return float(t)


def _cpu_wall_time(fn):
    t0 = time.perf_counter()
    raw = fn()
    return time.perf_counter() - t0, raw


def _gpu_wall_time(fn):
    """Wall time of GPU work a user's code launches, with the device synchronised on both sides."""
    import cupy
    device = cupy.cuda.Device(0)
    with device:
        device.synchronize()
        t0 = time.perf_counter()
        raw = fn()
        device.synchronize()
        return time.perf_counter() - t0, raw


def bytes_moved(stats: dict):
    """Bytes the app moved between devices, from its work counters.

    Apps report ``bytes_moved``; failing that, every counter whose name contains ``bytes`` is
    summed (numbers, or per-link/per-device lists and dicts of numbers). ``None`` if none.
    """
    if "bytes_moved" in stats:
        return _total(stats["bytes_moved"])
    found = [_total(v) for key, v in stats.items() if "bytes" in str(key).lower()]
    found = [x for x in found if x is not None]
    return sum(found) if found else None


def _total(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        parts = [_total(v) for v in value]
        parts = [p for p in parts if p is not None]
        return sum(parts) if parts else None
    return None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
