"""The lab: what proves and measures fleet from its checkout, never installed with it.

`pip install .` installs the product (`fleet`: what deploys and what runs on hosts). The lab
lives only in the repository, used by `tasks.py`, the tests and CI:

- `lab/harness/`   real SSH hosts in Docker, built offline (debootstrap + docker import);
- `lab/openclaw/`  the pinned Node + OpenClaw toolchain, a scripted OpenAI-compatible model, and
                   the sandbox OpenClaw hosts (local real gateways answering with that model);
- `lab/bench/`     side-by-side benchmarks (`invoke bench`);
- `lab/cli/`       their tasks, and the checkout's task tree (the product's plus these).

The lab imports the product; the product never imports the lab (tests/test_lab_boundary.py).
"""
