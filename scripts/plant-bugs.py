#!/usr/bin/env python3
"""The deliberate bugs of scripts/crash-bugs.sh, as changes to a copy of the tree (each
bug's change is in scripts/bugs/, by the part of the code it breaks; the machinery in
planting.py).

Most bugs are planted all at once, each behind a switch that the variable
HASHFS_PLANTED_BUG turns on at run time (`crate::planted::on("name")`, a module this
script adds to the copy's hashfs crate), so that one build serves every check and the
copy's code with no bug chosen is the tree's. A few change what cannot be switched at run
time (the symbols the interposer exports, a type, a constant); each of those is applied
alone, on top of the planted copy, and rebuilt (`rebuilt=True`).

  plant-bugs.py sync TREE COPY [NAME]  # makes COPY the tree at TREE with every switchable
                                  # bug planted (and the rebuilt bug NAME applied), writing
                                  # only the files that differ (cargo rebuilds no more)
  plant-bugs.py check TREE NAME.. # the same in memory: each change finds its code once,
                                  # and NAME.. (crash-bugs.sh's list) are the bugs here
  plant-bugs.py rebuilt           # the names of the bugs that are rebuilt

A change either swaps its lines (`lines`: the lines the bug's version and the tree's
differ in, behind `if on { bug } else { tree }`), or is written out (`plant`: the tree's
text and its replacement, `@ON` standing for the switch); a rebuilt bug's change is its
text (`sub`). Each bug's changes must find their code exactly once, in the tree as the
bugs before it (in the order of the imports below, and of each module) left it.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bugs"))
import planting  # noqa: E402
# The order the bugs are planted in: a bug that changes code another bug changed follows it.
import file_system, mappings, sharing, front_ends, spfs  # noqa: E402,F401

if __name__ == "__main__":
    planting.main()
