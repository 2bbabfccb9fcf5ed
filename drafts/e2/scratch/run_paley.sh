export PYTHONPATH=src OMP_NUM_THREADS=1
PY="nice -n 10 /work/main/.venv/bin/python scratch/probe.py"
for ro in overlap learned; do
for mp in "8 14" "12 22" "24 46"; do set -- $mp
$PY '{"kind":"table","pool":"paley","m":'$1',"P":'$2',"n_train":3000,"train_mix":{"uniform":0.5,"witness":0.5},"tests":["uniform","witness"],"readout":"'$ro'","steps":3000,"ranks":[1,2,4,8,16,32,64],"groups":[[1,2,4,8,16],[32,64]]}'
done; done
