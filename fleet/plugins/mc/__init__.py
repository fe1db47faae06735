"""The /mc command plugin (OpenClaw id `mc`)."""
