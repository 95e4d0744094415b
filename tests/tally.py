# SPDX-License-Identifier: MIT
"""The tally every Python image test keeps: one line per check ("ok   NAME"
or "FAIL NAME" with what went wrong, indented), then "N passed, M failed";
the exit status is what meson reads."""
import sys


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        """ok: a truth value (detail says why it failed)."""
        self.problems(name, [] if ok else [str(detail)])

    def problems(self, name, problems):
        """An empty list of problems passes; each problem gets a line."""
        if problems:
            self.failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print("    " + p)
        else:
            self.passed += 1
            print(f"ok   {name}")
        sys.stdout.flush()

    def summary(self, need_one=False):
        """Print the last line; the exit status: 1 on any failure (or on no
        check at all, with need_one)."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed or (need_one and not self.passed) else 0
