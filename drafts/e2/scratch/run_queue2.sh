export PYTHONPATH=src OMP_NUM_THREADS=1
PY="nice -n 10 /work/main/.venv/bin/python scratch/probe.py"
R='"ranks":[1,2,4,8,16,32,64,128],"groups":[[1,2,4,8,16],[32],[64],[128]]'
for ro in overlap learned; do
for mp in "8 256" "10 1024" "12 2048"; do set -- $mp
$PY '{"kind":"mlp","hidden":[],"pool":"closed","m":'$1',"P":'$2',"n_train":4000,"train_mix":{"uniform":1.0},"tests":["uniform","gap2","witness"],"readout":"'$ro'","steps":1500,'$R'}'
done; done
