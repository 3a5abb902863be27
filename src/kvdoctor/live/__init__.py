"""The live stream behind `kvdoctor watch` and `kvdoctor run`: a diagnosis per start-up as the log
arrives (`stream`), and the corrected `vllm serve` command (`fixcmd`)."""
