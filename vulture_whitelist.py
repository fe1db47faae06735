"""Names vulture (the dead-code finder in `invoke lint`) cannot see used, each with the reason.

Never imported or run: vulture only parses it. An entry is a name called by a framework or read
by something outside Python; dead code is removed, not listed here.
"""
# ruff: noqa: B018, F821

# http.server calls these by name on the scripted model's handler and server
# (lab/openclaw/model.py)
_.protocol_version
_.server_version
_.log_message
_.do_GET
_.do_POST
_.close_connection
_.daemon_threads
_.allow_reuse_address

# paramiko calls MissingHostKeyPolicy.missing_host_key (fleet/deploy/hostkeys.py)
_.missing_host_key

# argparse reads `required` on the subparsers action (fleet/gateway/__main__.py)
_.required

# the import system reads a package's `__path__` (fleet/gateway/loader.py)
_.__path__

# fields of result records, part of what their function reports (fleet/continuity/journal.py
# RunRecord.decayed, lab/harness/image.py ImageBuild.rootfs)
_.decayed
_.rootfs

# a rollout's options reach its record through dataclasses.asdict, every field by name; the
# bake reads this one from the record (fleet/deploy/rollout.py Options, both engines)
_.watch_every_s

# Invoke's Program and ParserContext call these overrides (fleet/cli/program.py: core flags stay
# flags in a task with a positional argument)
_._make_parser
_.help_tuples

# paramiko's Transport reads `_active_check_timeout` (its socket's timeout) and its reader thread
# calls these Packetizer methods (fleet/deploy/connection.py, the quiet handshake)
_._active_check_timeout
_.start_handshake
_.handshake_timed_out
_.complete_handshake

# /mc's subcommands: the plugin imports a subcommand's module and reads its function by name
# when it is first asked (fleet/plugins/mc/plugin.py COMMANDS)
cmd_state
cmd_state_all
cmd_compact
cmd_subagents
cmd_history
cmd_restore
cmd_clear
cmd_search
cmd_recall
cmd_settings
cmd_export
cmd_sessions
cmd_tags
cmd_summary
cmd_doctor
