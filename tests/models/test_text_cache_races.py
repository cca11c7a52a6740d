"""The blocked text-embedding cache against kills and a second writer: a run killed (SIGKILL) between blocks or
in the middle of joining them leaves no entry, the next run resumes from the finished blocks and removes the killed
run's temporary files; two encoders of the same label set at once both get the vectors, none fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np

from cladebench.models.text import class_text_embeddings, text_cache_key
from cladebench.templates import get_templates

LABELS = [f"label {i} {'a' * (i % 5)}" for i in range(23)]
BLOCK = 5


class Vectors:
    """A text tower that gives a text a vector from its characters and counts what it encodes; ``on_call`` runs
    before each call (with the call's number)."""

    model_id = "counting"
    revision = None

    def __init__(self, on_call=None) -> None:
        self.texts: list[str] = []
        self.on_call = on_call

    def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        if self.on_call is not None:
            self.on_call(len(self.texts) // BLOCK)
        self.texts += texts
        return np.array([[len(t), sum(map(ord, t)) % 97 + 1, t.count("a") + 1] for t in texts], dtype=np.float32)


CHILD = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    from cladebench.models import text

    class Vectors:
        model_id, revision = "counting", None
        def __init__(self): self.calls = 0
        def encode_texts(self, texts, batch_size=256):
            self.calls += 1
            if sys.argv[2] == "between-blocks" and self.calls == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return np.array([[len(t), sum(map(ord, t)) % 97 + 1, t.count("a") + 1] for t in texts], dtype=np.float32)

    if sys.argv[2] == "while-joining":
        def join_and_die(handle, parts, n, dim):
            handle.write(b"\\x93NUMPY half an entry")
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        text._join_parts = join_and_die
    labels = [f"label {i} {'a' * (i % 5)}" for i in range(23)]
    text.class_text_embeddings(Vectors(), labels, "{c}", cache_dir=sys.argv[1], block_labels=5)
""")


def _killed(cache: Path, when: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(cache), when], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr


def test_runs_killed_between_blocks_and_while_joining_leave_no_entry_and_the_next_run_resumes(tmp_path: Path) -> None:
    key = text_cache_key("counting", None, get_templates("{c}"), LABELS)
    folder = tmp_path / key[:2]
    _killed(tmp_path, "between-blocks")
    assert not (folder / f"{key}.npy").exists()
    assert len(list((folder / f"{key}.parts").glob("*.npy"))) == 2  # the two blocks finished before the kill
    _killed(tmp_path, "while-joining")  # every block done, killed half-way through the joined file
    assert not (folder / f"{key}.npy").exists()
    leftovers = list(folder.glob(f".{key}.npy.*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].read_bytes().startswith(b"\x93NUMPY half")

    resumed = Vectors()
    vectors = class_text_embeddings(resumed, LABELS, "{c}", cache_dir=tmp_path, block_labels=BLOCK)
    assert resumed.texts == []  # every block was on disk: nothing encoded again
    np.testing.assert_array_equal(vectors, class_text_embeddings(Vectors(), LABELS, "{c}", cache_dir=tmp_path / "x"))
    assert not list(folder.glob("*.tmp")) and not list(folder.glob(".*.tmp")), "the killed run's temporary file"
    assert not (folder / f"{key}.parts").exists()


def test_two_encoders_of_the_same_labels_at_once_both_get_the_vectors(tmp_path: Path) -> None:
    expected = class_text_embeddings(Vectors(), LABELS, "{c}", cache_dir=tmp_path / "one-pass")
    first_inside, second_started, second_done = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, np.ndarray] = {}
    errors: list[BaseException] = []

    def pause_in_the_second_block(call: int) -> None:
        # The first encoder stops in its second block until the other has run (or, when the other waits for
        # this one, a moment): before the lock the other finished, joined and removed the blocks meanwhile.
        if call == 1:
            first_inside.set()
            second_started.wait(30)
            second_done.wait(2)

    def encode(name: str, encoder: Vectors, before=None, after=None) -> None:
        try:
            if before is not None:
                before()
            results[name] = class_text_embeddings(encoder, LABELS, "{c}", cache_dir=tmp_path, block_labels=BLOCK)
        except BaseException as error:
            errors.append(error)
        finally:
            if after is not None:
                after()

    first = threading.Thread(target=encode, args=("first", Vectors(pause_in_the_second_block)))
    second = threading.Thread(target=encode, args=("second", Vectors()),
                              kwargs={"before": lambda: (first_inside.wait(30), second_started.set()),
                                      "after": second_done.set})
    first.start()
    second.start()
    first.join(60)
    second.join(60)
    assert not errors, errors
    for name in ("first", "second"):
        np.testing.assert_array_equal(results[name], expected, err_msg=name)
