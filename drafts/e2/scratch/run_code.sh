set -e
export PYTHONPATH=src OMP_NUM_THREADS=1
PY="nice -n 10 /work/main/.venv/bin/python scratch/probe.py"
$PY '{"kind":"table","pool":"code","m":24,"P":32,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"ranks":[1,2,4,8,16,32,64],"groups":[[1,2,4,8,16],[32,64]]}'
$PY '{"kind":"table","pool":"code","m":24,"P":64,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"ranks":[1,2,4,8,16,32,64],"groups":[[1,2,4,8,16],[32,64]]}'
$PY '{"kind":"table","pool":"random","m":24,"P":64,"train_mix":{"uniform":1.0},"tests":["uniform","gap2"],"ranks":[1,2,4,8,16,32,64],"groups":[[1,2,4,8,16],[32,64]]}'
