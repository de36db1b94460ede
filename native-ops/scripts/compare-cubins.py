#!/usr/bin/env python3
"""Compares the device machine code of two builds' CUDA objects section by section, without a GPU
or cuobjdump: a refactor that should leave the kernels alone proves it here.

  cmake -S native-ops -B <dir> -DDJL_ATTN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DDJL_ATTN_COMPRESS_FATBIN=OFF      # before and after the change, two trees
  make -C <dir>/cuda flash/flash_launch.o ...
  compare-cubins.py <before>/cuda/CMakeFiles/djl_attn_cuda.dir \
                    <after>/cuda/CMakeFiles/djl_attn_cuda.dir flash/flash_launch.cu.o ...

Extracts the ELF cubins from each object's .nv_fatbin (uncompressed: DJL_ATTN_COMPRESS_FATBIN=OFF)
and compares, per cubin and by (normalised) name: every kernel's machine code (.text.*), its
constant banks and shared-memory sections, its .nv.info attributes with symbol indices read as
symbol names, and the symbol table as a set of (name, size, type, binding, section). Names are
normalised where they carry a hash of the translation unit's path and content (anonymous
namespaces). Line tables and debug sections (-lineinfo) move with source lines; they are
counted apart. Relocation sections are compared with symbol indices read as names too."""
import hashlib, re, struct, subprocess, sys, tempfile, os

ANON = re.compile(r'_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?)_[0-9a-f]{8}')
def norm(name):
    return ANON.sub(r'_GLOBAL__N__ANON_\1_ANON', name)

def parse(elf):
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3A)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', elf, shoff + i * shentsize) for i in range(shnum)]
    def cstr(table_off, off):
        start = table_off + off
        return elf[start:elf.index(b'\0', start)].decode()
    names = [norm(cstr(hdrs[shstrndx][4], h[0])) for h in hdrs]
    data = [b'' if h[1] == 8 else elf[h[4]:h[4] + h[5]] for h in hdrs]
    syms = []
    for i, h in enumerate(hdrs):
        if h[1] == 2:  # SHT_SYMTAB
            strtab = hdrs[h[6]][4]
            for j in range(h[5] // 24):
                st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                    '<IBBHQQ', data[i], j * 24)
                nm = norm(cstr(strtab, st_name))
                sec = names[st_shndx] if 0 < st_shndx < len(names) else str(st_shndx)
                if not nm: nm = 'section:' + sec
                syms.append((nm, st_size, st_info, st_other, sec, st_value))
    return hdrs, names, data, syms

def nv_info(blob, syms):
    out, i = [], 0
    while i + 2 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        i += 2
        if fmt == 4:  # SVAL: size + payload
            size, = struct.unpack_from('<H', blob, i); i += 2
            payload = blob[i:i + size]; i += size
            if size >= 4:
                idx, = struct.unpack_from('<I', payload, 0)
                head = syms[idx][0] if 0 < idx < len(syms) else idx
                out.append((attr, head, payload[4:]))
            else:
                out.append((attr, payload))
        elif fmt == 3:
            out.append((attr, blob[i:i + 2])); i += 2
        elif fmt == 2:
            out.append((attr, blob[i:i + 1])); i += 1
        else:
            out.append((attr,))
    return sorted(out, key=repr)

def rel(blob, syms, rela):
    ent = 24 if rela else 16
    out = []
    for j in range(len(blob) // ent):
        off, info = struct.unpack_from('<QQ', blob, j * ent)
        add = struct.unpack_from('<q', blob, j * ent + 16)[0] if rela else 0
        s = info >> 32
        out.append((off, info & 0xffffffff, syms[s][0] if s < len(syms) else s, add))
    return out

DEBUG = ('.debug', '.nv_debug', '.rel.debug', '.rela.debug', '.rel.nv_debug', '.rela.nv_debug')

def digest(elf):
    hdrs, names, data, syms = parse(elf)
    out, debug = {}, {}
    for h, nm, d in zip(hdrs, names, data):
        if not nm: continue
        if nm.startswith(DEBUG):
            debug[nm] = hashlib.sha1(d).hexdigest(); continue
        if nm in ('.symtab', '.strtab', '.shstrtab'): continue
        if nm.startswith('.nv.info'):
            v = nv_info(d, syms)
        elif h[1] in (4, 9):  # RELA, REL
            v = rel(d, syms, h[1] == 4)
        else:
            v = (h[1], h[5], hashlib.sha1(d).hexdigest())
        out.setdefault(nm, []).append(v)
    out['symbols'] = sorted(s[:5] for s in syms)
    return out, debug

def cubins(obj):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'fb')
        subprocess.run(['objcopy', '-O', 'binary', '--only-section=.nv_fatbin', obj, out], check=True)
        blob = open(out, 'rb').read()
    res, i = [], 0
    while True:
        i = blob.find(b'\x7fELF', i)
        if i < 0: break
        shoff, = struct.unpack_from('<Q', blob, i + 0x28)
        shentsize, shnum = struct.unpack_from('<HH', blob, i + 0x3A)
        end = i + shoff + shentsize * shnum
        res.append(blob[i:end]); i = end
    return res

def compare(a, b):
    ca, cb = cubins(a), cubins(b)
    if len(ca) != len(cb):
        return ['cubin count %d vs %d' % (len(ca), len(cb))], 0, 0
    diffs, kernels, dbg = [], 0, 0
    for ea, eb in zip(ca, cb):
        (da, ga), (db, gb) = digest(ea), digest(eb)
        kernels += sum(1 for n in da if n.startswith('.text.'))
        diffs += [n for n in sorted(set(da) | set(db)) if da.get(n) != db.get(n)]
        dbg += sum(1 for n in set(ga) | set(gb) if ga.get(n) != gb.get(n))
    return diffs, kernels, dbg

if __name__ == '__main__':
    base, after = sys.argv[1], sys.argv[2]
    for relpath in sys.argv[3:]:
        a, b = os.path.join(base, relpath), os.path.join(after, relpath)
        if not (os.path.exists(a) and os.path.exists(b)):
            print('%-42s MISSING' % relpath); continue
        diffs, k, dbg = compare(a, b)
        print('%-42s %s %3d kernels; %s; line/debug sections differing: %d' % (
            relpath, 'SAME' if not diffs else 'DIFF', k,
            'every non-debug section equal' if not diffs else 'differ: ' + ', '.join(diffs[:6]), dbg))
