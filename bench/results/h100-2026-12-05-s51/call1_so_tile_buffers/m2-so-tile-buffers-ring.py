# Emulates ReplayMmaStream's tile-buffer ring (kTileBuffers): 4 warps, thread 0 in warp 0 refills,
# mbarrier phases by parity. Random interleavings; checks every warp reads tile t's data and no
# refill overwrites a buffer a warp has not read, and that nothing deadlocks. Run: python3 <this file>
# (prints ok). Written in session 51 beside docs/prepared/m2-so-tile-buffers.patch.
import random
class Bar:
    def __init__(s, count): s.count=count; s.pending=count; s.phase=0; s.tx=0
    def arrive(s):
        s.pending-=1; s._maybe()
    def expect(s, b): s.tx+=b; s.pending-=1; s._maybe()
    def complete_tx(s,b): s.tx-=b; s._maybe()
    def _maybe(s):
        if s.pending==0 and s.tx==0: s.phase+=1; s.pending=s.count
    def done(s, parity): return (s.phase & 1) != parity  # try_wait.parity(p): true once phase p completed
def run(num_tiles, bufs, seed):
    rnd=random.Random(seed)
    fills=min(bufs,num_tiles)
    full=[Bar(1) for _ in range(bufs)]; empty=[Bar(4) for _ in range(bufs)]
    data=[None]*bufs; inflight=[]  # (buf, tile)
    for k in range(fills): full[k].expect(1); inflight.append((k,k))
    st=[dict(tile=0,buf=0,fill=0,phase='wait_full') for _ in range(4)]
    steps=0
    while any(s['tile']<num_tiles for s in st) or inflight:
        steps+=1
        if steps>100000: raise RuntimeError('deadlock', num_tiles,bufs,seed,st)
        acts=[]
        if inflight: acts.append('copy')
        for w in range(4):
            if st[w]['tile']<num_tiles: acts.append(w)
        a=rnd.choice(acts)
        if a=='copy':
            b,t=inflight.pop(rnd.randrange(len(inflight)))
            assert data[b] is None or data[b][1]==4, ('overwrite before all read', b, data[b])
            data[b]=[t,0]; full[b].complete_tx(1); continue
        s=st[a]
        if s['phase']=='wait_full':
            if full[s['buf']].done(s['fill']&1):
                assert data[s['buf']][0]==s['tile'], ('wrong tile', a, s, data[s['buf']])
                data[s['buf']][1]+=1
                empty[s['buf']].arrive()
                s['phase']='refill' if a==0 else 'next'
        elif s['phase']=='refill':
            if s['tile']+bufs<num_tiles:
                if empty[s['buf']].done(s['fill']&1):
                    full[s['buf']].expect(1); inflight.append((s['buf'], s['tile']+bufs)); s['phase']='next'
            else: s['phase']='next'
        if s['phase']=='next':
            s['tile']+=1; s['buf']+=1
            if s['buf']==bufs: s['buf']=0; s['fill']+=1
            s['phase']='wait_full'
for nt in range(1,9):
    for b in range(1,9):  # more buffers than tiles: the last chunk of a split head
        for seed in range(300): run(nt,b,seed)
print('ok')
