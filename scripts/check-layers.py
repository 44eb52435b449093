#!/usr/bin/env python3
"""The layer check: every #include of thd's sources against the architecture's arrows.

docs/architecture.md ("Layers and dependencies") describes the layers; the table
below is the one place their rules live. A source file belongs to the layer of the
longest folder prefix in LAYERS. It may include, without asking:
  - anything of its own layer,
  - the public headers (include/thd/, <thd/...>),
  - headers outside the repository (system, third-party, generated files).
Any other header of the repository is another layer's, and the include passes only
when USES gives the including layer that layer with either ALL (any header of it)
or FACE (only the headers FACES lists for it: what it offers the layers above).
FILE_USES lets one named file reach further, with its reason.

Usage: check-layers.py [--root DIR] [FILE...]
With no FILE, checks every source file under the root (build folders, .git and
shared/ left out). Prints one line per forbidden include, "path:line: ...", and
exits 1 when there is any, 0 otherwise.
"""

import argparse
import fnmatch
import os
import re
import sys

# ---- the rule table ---------------------------------------------------------------

# Folder prefix -> layer. Inside datachannel/, the core (the top level, net/, store/,
# collectives/) is one layer and each backend folder one of its own, so a backend
# reaches the core but never another backend's internals.
LAYERS = {
    "include/thd": "public",
    "tensor": "tensor",  # tensor/cuda/ included: one library, thd_tensor
    "datachannel": "datachannel",
    "datachannel/tcp": "datachannel/tcp",
    "datachannel/pipe": "datachannel/pipe",
    "datachannel/mpi": "datachannel/mpi",
    "datachannel/ucx": "datachannel/ucx",
    "datachannel/libfabric": "datachannel/libfabric",
    "datachannel/nccl": "datachannel/nccl",
    "streams": "streams",
    "protocol": "protocol",
    "master": "master",
    "worker": "worker",
    "tools": "tools",
    "python": "python",
    "examples": "examples",
    "bench": "bench",
    "tests": "tests",
}

ALL = "all"
FACE = "face"

# What each layer offers the layers above beyond include/thd/: headers of its
# folder that are part of its interface to the rest of thd, not installed for users
# (they use fmt, CUDA or other private dependencies). Globs, relative to the root.
FACES = {
    "tensor": [
        "tensor/check.h",  # THD_THROW / THD_CHECK: how every layer raises a thd::Error
        "tensor/log.h",  # THD_LOG_*: the one diagnostic log
        "tensor/function_ref.h",  # a callable passed down a call without a copy
        "tensor/dispatch.h",  # the switch from a DType to a C++ type (datachannel's reduction kernels)
        "tensor/int_math.h",  # integer arithmetic that wraps like torch's (the same kernels)
        "tensor/op_util.h",  # a tensor op's argument checks, which the master runs before it emits an op
        "tensor/shape_util.h",  # shape arithmetic (strides, broadcasting) the master's inference shares with the ops
        "tensor/cpu_allocator.h",  # the CPU allocator's byte count read without a lock: a worker's per-op memory limit
        "tensor/env_setting.h",  # the one reader of whole-number settings from the environment, for every layer
        # Ops written into an existing tensor: a worker's graph replays reuse storage.
        "tensor/into.h",
        "tensor/into_creation.h",
        "tensor/into_elementwise.h",
        "tensor/into_indexing.h",
        "tensor/into_join.h",
        "tensor/into_linalg.h",
        "tensor/into_random.h",
        "tensor/into_reduce.h",
        "tensor/into_softmax.h",
        "tensor/into_sort.h",
        # The CUDA runtime under thd::cuda (streams and their pool, events, the caching
        # allocator's record_stream), which the worker's GPU streams and the NCCL backend drive.
        "tensor/cuda/cuda_check.h",
        "tensor/cuda/cuda_stream.h",
        "tensor/cuda/event_pool.h",
        "tensor/cuda/caching_allocator.h",
    ],
    "datachannel": [
        "datachannel/check.h",  # THD_THROW_AT: a thd::Error naming the rank and the peer it concerns
        "datachannel/backend_choice.h",  # the backend and the launcher a job's launch chose
        "datachannel/runtime_queries.h",  # what the runtime asks a channel when it plans a collective
        "datachannel/collectives/float32_accumulation.h",  # 16-bit reductions' float32 scratch, which workers budget
        "datachannel/net/fd.h",  # UniqueFd: an owned file descriptor
        "datachannel/net/thread_name.h",  # names a thread for ps, perf and gdb
    ],
    # streams/ and protocol/ exist for master/ and worker/: every header is their interface.
    "streams": ["streams/*.h"],
    "protocol": ["protocol/*.h"],
    # The runtime's entry points that the launcher and the worker executable drive.
    "master": ["master/job_mode.h"],
    "worker": ["worker/pool.h"],
}

_BACKEND_BASE = {"datachannel": ALL, "tensor": FACE}

# layer -> {layer it may include from: ALL or FACE}. A layer missing here, or a
# layer missing from its entry, may include nothing of it (include/thd/ aside).
USES = {
    "public": {},
    "tensor": {},
    "datachannel": {"tensor": FACE},
    "datachannel/tcp": _BACKEND_BASE,
    # pipe/ is the layer under the message-library backends, not a backend of its own.
    "datachannel/pipe": _BACKEND_BASE,
    "datachannel/mpi": {**_BACKEND_BASE, "datachannel/pipe": ALL},
    "datachannel/ucx": {**_BACKEND_BASE, "datachannel/pipe": ALL},
    "datachannel/libfabric": {**_BACKEND_BASE, "datachannel/pipe": ALL},
    "datachannel/nccl": _BACKEND_BASE,
    "streams": {"tensor": FACE},
    "protocol": {"tensor": FACE, "datachannel": FACE},
    "master": {"protocol": FACE, "streams": FACE, "datachannel": FACE, "tensor": FACE},
    "worker": {"protocol": FACE, "streams": FACE, "datachannel": FACE, "tensor": FACE},
    "tools": {"master": FACE, "worker": FACE, "protocol": FACE, "datachannel": FACE, "tensor": FACE},
    # The bindings and the examples are programs of thd's users: include/thd/ only.
    "python": {},
    "examples": {},
    # The tests and the benchmarks check and measure the internals of every layer.
    "tests": {layer: ALL for layer in set(LAYERS.values())},
    "bench": {layer: ALL for layer in set(LAYERS.values())},
}

# file -> [(header glob, reason)]: the only includes past the table above.
FILE_USES = {
    # Every SPMD program is a master on rank 0 and a worker on the others (one
    # library, thd_runtime): init_master_worker serves the worker's session there.
    "master/init.cpp": [("worker/worker.h", "SPMD ranks > 0 serve as workers")],
}

# ---- the check --------------------------------------------------------------------

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c", ".cu", ".cuh", ".inl")
SKIPPED_DIRS = {".git", "shared", "__pycache__", "node_modules"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    """The layer of a repository-relative path, or None outside every layer."""
    best = None
    for prefix, layer in LAYERS.items():
        if (path == prefix or path.startswith(prefix + "/")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def resolve(root, including, name, quoted):
    """The repository-relative path an include names, or None for one outside the repository."""
    candidates = []
    if quoted:
        candidates.append(os.path.join(os.path.dirname(including), name))
    candidates += [name, os.path.join("include", name)]
    for candidate in candidates:
        candidate = os.path.normpath(candidate)
        if not candidate.startswith("..") and os.path.isfile(os.path.join(root, candidate)):
            return candidate
    # A header the include names by its layer's folder but that is not there (deleted,
    # or planted with a typo) still names a layer: judge it by that.
    first = name.split("/", 1)[0]
    if "/" in name and any(prefix.split("/", 1)[0] == first for prefix in LAYERS):
        return os.path.normpath(name)
    return None


def allowed(path, layer, header, header_layer):
    if header_layer is None or header_layer == layer or header_layer == "public":
        return True
    for glob, _reason in FILE_USES.get(path, []):
        if fnmatch.fnmatchcase(header, glob):
            return True
    how = USES.get(layer, {}).get(header_layer)
    if how == ALL:
        return True
    if how == FACE:
        return any(fnmatch.fnmatchcase(header, glob) for glob in FACES.get(header_layer, []))
    return False


def explain(layer, header, header_layer):
    how = USES.get(layer, {}).get(header_layer)
    if how == FACE:
        faces = ", ".join(FACES.get(header_layer, [])) or "none"
        return (f"layer {layer} may include only the face of layer {header_layer} "
                f"(include/thd/ and {faces}), not {header}")
    return f"layer {layer} may not include layer {header_layer}'s {header}"


def check_file(root, path):
    """The violations of one repository-relative file: (line number, message)."""
    layer = layer_of(path)
    if layer is None:
        return []
    found = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            header = resolve(root, path, match.group(2), match.group(1) == '"')
            if header is None:
                continue
            header_layer = layer_of(header)
            if not allowed(path, layer, header, header_layer):
                found.append((number, explain(layer, header, header_layer)))
    return found


def source_files(root):
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIPPED_DIRS and not (rel == "." and d.startswith("build")))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.normpath(os.path.join(rel, name))


def check_table():
    """Mistakes in the table itself, so a typo cannot silently allow nothing or everything."""
    layers = set(LAYERS.values())
    problems = [f"USES names unknown layer {name}" for name in USES if name not in layers]
    for name, uses in USES.items():
        problems += [f"USES[{name}] names unknown layer {other}" for other in uses if other not in layers]
        problems += [f"USES[{name}][{other}] is {how!r}, not ALL or FACE"
                     for other, how in uses.items() if how not in (ALL, FACE)]
    problems += [f"FACES names unknown layer {name}" for name in FACES if name not in layers]
    for name, globs in FACES.items():
        problems += [f"FACES[{name}] lists {glob}, outside layer {name}"
                     for glob in globs if layer_of(glob) != name]
    return problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("files", nargs="*", help="repository-relative files (default: every source file)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)

    problems = check_table()
    for problem in problems:
        print(f"scripts/check-layers.py: {problem}", file=sys.stderr)
    files = [os.path.normpath(f) for f in args.files] or list(source_files(root))
    violations = 0
    for path in files:
        if not os.path.isfile(os.path.join(root, path)):
            print(f"{path}: no such file under {root}", file=sys.stderr)
            violations += 1
            continue
        for number, message in check_file(root, path):
            print(f"{path}:{number}: {message}")
            violations += 1
    if problems or violations:
        print(f"check-layers: {violations} forbidden include(s); the rules: scripts/check-layers.py, "
              "docs/architecture.md \"Layers and dependencies\"", file=sys.stderr)
        return 1
    print(f"check-layers: {len(files)} files, every include follows the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
