"""The `fleet` console script as a user runs it, for tests that start it as a process:
`[sys.executable, "-c", FLEET, ...]` (the venv's Python, whatever its bin dir holds)."""

FLEET = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"
