# Helpers the bench scripts share (sourced, not run).
# The lower median of the numbers on stdin (spaces or newlines between them).
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# tokens/s of the run in folder $1 (its summary.json).
tokens_of() { python3 -c "import json;print(json.load(open('$1/summary.json'))['tokens_per_s'])"; }
