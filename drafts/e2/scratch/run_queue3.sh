export PYTHONPATH=src OMP_NUM_THREADS=1
PY="nice -n 10 /work/main/.venv/bin/python scratch/probe.py"
R='"ranks":[1,2,4,8,16,32,64,128],"groups":[[1,2,4,8,16],[32,64],[128]]'
# shared random (complement-closed) pools, problem size = pool size at m = 12
for ro in overlap learned; do
for P in 32 64 128; do
$PY '{"kind":"table","pool":"closed","m":12,"P":'$P',"n_train":4000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","gap2","witness"],"readout":"'$ro'","steps":3000,'$R'}'
done; done
# Paley m = 32 (P = 62), and refinement ranks with 3 seeds at m = 12, 24
$PY '{"kind":"table","pool":"paley","m":32,"P":62,"n_train":3000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"readout":"overlap","steps":3000,'$R'}'
for mp in "12 22" "24 46"; do set -- $mp
$PY '{"kind":"table","pool":"paley","m":'$1',"P":'$2',"n_train":3000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"readout":"overlap","steps":3000,"seeds":[0,1,2],"ranks":[8,12,16,20,24,28,32,40,48,64],"groups":[[8,12,16,20,24],[28,32,40,48,64]],"tag":"refine"}'
done
