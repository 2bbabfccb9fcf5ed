export PYTHONPATH=src OMP_NUM_THREADS=1
PY="nice -n 10 /work/main/.venv/bin/python scratch/probe.py"
$PY '{"kind":"table","pool":"paley","m":12,"P":22,"n_train":3000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"readout":"overlap","steps":3000,"seeds":[0,1,2],"ranks":[1,2,4,8,12,16,20,24,28,32,48,64],"groups":[[1,2,4,8,12,16,20,24],[28,32,48,64]],"tag":"refine2"}'
$PY '{"kind":"mlp","hidden":[],"pool":"closed","m":10,"P":1024,"n_train":4000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","gap2","witness"],"readout":"learned","steps":1500,"ranks":[1,2,4,8,16,32,64,128],"groups":[[1,2,4,8,16],[32],[64],[128]],"tag":"mix"}'
