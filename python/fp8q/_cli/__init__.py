"""fp8q's command line and what only it uses: `python -m fp8q` (_main: its
parser and dispatch), info's printing aside (fp8q._info, which also backs
fp8q.info()), the benchmarks (_bench*), the demo (_demo), and the checkpoint
commands convert (_convert_checkpoint) and inspect (_inspect_checkpoint).
Nothing in the library imports this package."""
