#!/usr/bin/env python3
"""Tests of scripts/check-layers.py: it passes the tree as it is, and fails, naming
the file and the line, on each kind of include the layer rules forbid."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check-layers.py")


def load_script():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


layers = load_script()


def run(root, *files):
    result = subprocess.run([sys.executable, SCRIPT, "--root", root, *files],
                            capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout, result.stderr


def copy_tree(destination):
    """The repository's sources, without build folders and .git."""
    def ignore(folder, names):
        skipped = {".git", "shared", "__pycache__"}
        if os.path.abspath(folder) == ROOT:
            skipped |= {n for n in names if n.startswith("build")}
        return [n for n in names if n in skipped]
    shutil.copytree(ROOT, destination, ignore=ignore)


def read(path):
    with open(path) as f:
        return f.read()


def plant(root, path, include, line=2):
    """Inserts `include` into root/path so that it is line `line`."""
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    lines = read(full).splitlines(keepends=True) if os.path.exists(full) else []
    while len(lines) < line - 1:
        lines.append("\n")
    lines.insert(line - 1, include + "\n")
    with open(full, "w") as f:
        f.writelines(lines)


class TheTree(unittest.TestCase):
    def test_the_tree_follows_the_layers(self):
        rc, out, err = run(ROOT)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("every include follows the layers", out)

    def test_the_table_is_consistent(self):
        self.assertEqual(layers.check_table(), [])


class PlantedIncludes(unittest.TestCase):
    """Forbidden includes planted into a copy of the real tree."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="thd-layers-")
        cls.root = os.path.join(cls.tmp, "thd")
        copy_tree(cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def check_planted(self, path, include, expected_words, line=2):
        full = os.path.join(self.root, path)
        original = read(full) if os.path.exists(full) else None
        plant(self.root, path, include, line)
        try:
            rc, out, err = run(self.root)
        finally:
            if original is None:
                os.remove(full)
            else:
                with open(full, "w") as f:
                    f.write(original)
        self.assertEqual(rc, 1, out + err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 1, out)
        self.assertTrue(lines[0].startswith(f"{path}:{line}: "), lines[0])
        for word in expected_words:
            self.assertIn(word, lines[0])
        self.assertIn("1 forbidden include", err)

    def test_a_lower_layer_including_a_higher_one(self):
        self.check_planted("tensor/tensor.cpp", '#include "worker/worker.h"',
                           ["layer tensor", "worker/worker.h"], line=3)

    def test_a_private_header_of_a_lower_layer(self):
        self.check_planted("worker/ops_transfer.cpp", '#include "datachannel/group_state.h"',
                           ["layer worker", "face of layer datachannel", "datachannel/group_state.h"])

    def test_one_backend_including_another(self):
        self.check_planted("datachannel/pipe/pipe_transport.cpp", '#include "datachannel/tcp/mesh.h"',
                           ["layer datachannel/pipe", "datachannel/tcp/mesh.h"])

    def test_the_core_including_a_backend(self):
        self.check_planted("datachannel/data_channel.cpp", '#include "datachannel/nccl/nccl_backend.h"',
                           ["layer datachannel ", "datachannel/nccl/nccl_backend.h"])

    def test_a_header_that_does_not_exist(self):
        self.check_planted("streams/executor.cpp", '#include "master/no_such_header.h"',
                           ["layer streams", "master/no_such_header.h"])

    def test_an_angle_include_of_a_private_header(self):
        self.check_planted("python/src/module.cpp", "#include <tensor/check.h>",
                           ["layer python", "tensor/check.h"])

    def test_a_user_program_including_internals(self):
        self.check_planted("examples/quickstart/planted.cpp", '#include "tensor/log.h"',
                           ["layer examples", "tensor/log.h"])

    def test_the_public_headers_include_no_layer(self):
        self.check_planted("include/thd/tensor.h", '#include "tensor/check.h"',
                           ["layer public", "tensor/check.h"])

    def test_an_exception_is_for_its_file_only(self):
        self.check_planted("master/session.cpp", '#include "worker/worker.h"',
                           ["layer master", "worker/worker.h"])

    def test_the_tests_may_include_anything(self):
        plant(self.root, "tests/unit/planted_test.cpp", '#include "datachannel/tcp/mesh.h"')
        try:
            rc, out, err = run(self.root)
        finally:
            os.remove(os.path.join(self.root, "tests/unit/planted_test.cpp"))
        self.assertEqual(rc, 0, out + err)

    def test_files_named_on_the_command_line(self):
        plant(self.root, "streams/planted.cpp", '#include "protocol/codec.h"', line=4)
        try:
            rc, out, _ = run(self.root, "streams/planted.cpp", "streams/executor.cpp")
        finally:
            os.remove(os.path.join(self.root, "streams/planted.cpp"))
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines(), [
            "streams/planted.cpp:4: layer streams may not include layer protocol's protocol/codec.h"])


class Rules(unittest.TestCase):
    """The rule table's reading, on the real tree's paths."""

    def test_layer_of_takes_the_longest_prefix(self):
        self.assertEqual(layers.layer_of("datachannel/tcp/mesh.h"), "datachannel/tcp")
        self.assertEqual(layers.layer_of("datachannel/net/fd.h"), "datachannel")
        self.assertEqual(layers.layer_of("tensor/cuda/cuda_stream.h"), "tensor")
        self.assertEqual(layers.layer_of("include/thd/tensor.h"), "public")
        self.assertIsNone(layers.layer_of("cmake/config.h.in"))

    def test_faces(self):
        self.assertTrue(layers.allowed("worker/x.cpp", "worker", "datachannel/net/fd.h", "datachannel"))
        self.assertFalse(layers.allowed("worker/x.cpp", "worker", "datachannel/channel_util.h", "datachannel"))
        self.assertTrue(layers.allowed("worker/x.cpp", "worker", "tensor/check.h", "tensor"))
        self.assertFalse(layers.allowed("streams/x.cpp", "streams", "datachannel/check.h", "datachannel"))

    def test_a_broken_table_is_reported(self):
        saved = dict(layers.USES)
        try:
            layers.USES["worker"] = {**saved["worker"], "datachanel": layers.FACE}
            self.assertIn("USES[worker] names unknown layer datachanel", layers.check_table())
        finally:
            layers.USES.clear()
            layers.USES.update(saved)


if __name__ == "__main__":
    unittest.main()
