"""Real OpenClaw on the control machine: the pinned toolchain and the scripted model.

Control side. `toolchain` installs a pinned Node and OpenClaw from the npm registry into a cache
inside the project (`invoke openclaw.install`); `model` is a scripted OpenAI-compatible server
(stdlib only, runnable on its own) that the sandbox and the tests point OpenClaw's agents at.
"""
