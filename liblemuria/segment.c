/* Client runtime: the main executable's data segment as a shippable image,
 * for lm_create (docs/dsm.md step 14).  Describes [__data_start, _end)
 * from the program headers and the dynamic relocations, captures it and
 * applies it in another process of the same executable.
 *
 * Choices beyond the brief (see segment.h):
 *  - the image starts with a 32-byte header (magic, sender's load base,
 *    segment offset from the base, segment length) so a receiver can
 *    refuse an image from another executable and can move pointers;
 *  - only the blocks that hold a byte other than zero travel, as runs:
 *    a program's large zeroed .bss would otherwise go to every worker,
 *    through every daemon's send queue, in every CREATE; the receiver
 *    zeroes the rest, writing only the words that are not zero already,
 *    so that .bss pages it never wrote are not made private copies;
 *  - slots that the dynamic linker filled from a *symbol* (R_X86_64_64,
 *    GLOB_DAT ... against library symbols) are excluded like copy
 *    relocations: their value is an address in another process's
 *    libraries; a program that reassigns such a pointer before CREATE
 *    does not see the new value in its workers;
 *  - slots filled by RELATIVE (and RELR, IRELATIVE) relocations hold
 *    addresses inside the executable: when the sender's load base
 *    differs from ours and the value still points into the sender's
 *    executable, it is moved by the difference.  Pointers into the
 *    executable stored at run time in other globals are not moved;
 *  - the module's own state is excluded when it lies in the segment
 *    (static link, as in the unit tests), so apply cannot clobber it;
 *  - copies in and out of the segment go through a byte/word loop built
 *    without AddressSanitizer instrumentation: instrumented globals have
 *    redzones, which are ours to copy but ASan would report. */
#include "segment.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm_error.h"

#if defined(__x86_64__)
#define SEG_R_COPY R_X86_64_COPY
#define SEG_R_RELATIVE R_X86_64_RELATIVE
#define SEG_R_IRELATIVE R_X86_64_IRELATIVE
#elif defined(__aarch64__)
#define SEG_R_COPY R_AARCH64_COPY
#define SEG_R_RELATIVE R_AARCH64_RELATIVE
#define SEG_R_IRELATIVE R_AARCH64_IRELATIVE
#endif

#define SEG_MAGIC 0x3247455344534d4cull /* "LMSDSEG2" little-endian */
#define SEG_MAX_TEXT 8

/* crt1.o defines it at the start of .data; weak so that a program
 * without it fails with a message instead of at link time. */
extern char __data_start[] __attribute__((weak));

struct seg_header {
	uint64_t magic;
	uint64_t base;     /* sender's load base */
	uint64_t start;    /* segment start - load base */
	uint64_t len;      /* segment bytes */
};

static struct seg_state {
	pthread_mutex_t lock;
	int program;       /* 1 once the program headers were read */
	int described;     /* 1 described, -1 failed (why) */
	char why[200];
	uintptr_t base;            /* load base (dlpi_addr) */
	uintptr_t lo, hi;          /* extent of the PT_LOAD segments, offsets */
	struct lm_segment_range text[SEG_MAX_TEXT]; /* executable, offsets */
	size_t ntext;
	const ElfW(Phdr) *phdr;
	size_t phnum;
	uintptr_t start, end;      /* the segment, addresses */
	struct lm_segment_range *excl; /* sorted, merged */
	size_t nexcl, excl_cap;
	uintptr_t *rel;            /* relative pointer slots in the segment */
	size_t nrel, rel_cap;
} seg = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- copies that ASan must not see ------------------------------------ */

__attribute__((no_sanitize_address)) static void raw_copy(uint8_t *dst,
							   const uint8_t *src,
							   size_t n)
{
	volatile uint8_t *d = dst;
	const volatile uint8_t *s = src;
	size_t i = 0;

	/* volatile keeps the compiler from turning the loop into a call to
	 * memcpy, which ASan intercepts. */
	if ((((uintptr_t)dst ^ (uintptr_t)src) & 7) == 0) {
		for (; i < n && ((uintptr_t)(dst + i) & 7); i++)
			d[i] = s[i];
		for (; i + 8 <= n; i += 8)
			*(volatile uint64_t *)(dst + i) =
				*(const volatile uint64_t *)(src + i);
	}
	for (; i < n; i++)
		d[i] = s[i];
}

/* Whether [a, a + n) holds a byte other than zero. */
__attribute__((no_sanitize_address)) static int raw_nonzero(const uint8_t *a,
							     size_t n)
{
	const volatile uint8_t *p = a;
	size_t i = 0;

	for (; i < n && ((uintptr_t)(a + i) & 7); i++)
		if (p[i])
			return 1;
	for (; i + 32 <= n; i += 32) {
		const volatile uint64_t *w =
			(const volatile uint64_t *)(a + i);

		if (w[0] | w[1] | w[2] | w[3])
			return 1;
	}
	for (; i < n; i++)
		if (p[i])
			return 1;
	return 0;
}

/* Zeroes [a, a + n), writing only what is not zero: a page of .bss that
 * was never written stays the shared zero page. */
__attribute__((no_sanitize_address)) static void raw_clear(uint8_t *a,
							    size_t n)
{
	volatile uint8_t *p = a;
	size_t i = 0;

	for (; i < n && ((uintptr_t)(a + i) & 7); i++)
		if (p[i])
			p[i] = 0;
	for (; i + 8 <= n; i += 8) {
		volatile uint64_t *w = (volatile uint64_t *)(a + i);

		if (*w)
			*w = 0;
	}
	for (; i < n; i++)
		if (p[i])
			p[i] = 0;
}

/* ---- description ------------------------------------------------------- */

static int first_object(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size;
	(void)ctx;
	seg.base = info->dlpi_addr;
	seg.phdr = info->dlpi_phdr;
	seg.phnum = info->dlpi_phnum;
	return 1; /* the first entry is the main program */
}

static void read_program(void)
{
	seg.lo = UINTPTR_MAX;
	seg.hi = 0;
	dl_iterate_phdr(first_object, NULL);
	for (size_t i = 0; i < seg.phnum; i++) {
		const ElfW(Phdr) *p = &seg.phdr[i];

		if (p->p_type != PT_LOAD)
			continue;
		if (p->p_vaddr < seg.lo)
			seg.lo = p->p_vaddr;
		if (p->p_vaddr + p->p_memsz > seg.hi)
			seg.hi = p->p_vaddr + p->p_memsz;
		if ((p->p_flags & PF_X) && seg.ntext < SEG_MAX_TEXT)
			seg.text[seg.ntext++] = (struct lm_segment_range){
				p->p_vaddr, p->p_vaddr + p->p_memsz };
	}
	seg.program = 1;
}

static int push_excl(uintptr_t a, uintptr_t b)
{
	if (a < seg.start)
		a = seg.start;
	if (b > seg.end)
		b = seg.end;
	if (a >= b)
		return 0;
	if (seg.nexcl == seg.excl_cap) {
		size_t cap = seg.excl_cap ? 2 * seg.excl_cap : 16;
		void *p = realloc(seg.excl, cap * sizeof(*seg.excl));

		if (!p)
			return LM_ENOMEM;
		seg.excl = p;
		seg.excl_cap = cap;
	}
	seg.excl[seg.nexcl++] = (struct lm_segment_range){ a, b };
	return 0;
}

static int push_rel(uintptr_t slot)
{
	if (slot < seg.start || slot + sizeof(uintptr_t) > seg.end)
		return 0;
	if (seg.nrel == seg.rel_cap) {
		size_t cap = seg.rel_cap ? 2 * seg.rel_cap : 64;
		void *p = realloc(seg.rel, cap * sizeof(*seg.rel));

		if (!p)
			return LM_ENOMEM;
		seg.rel = p;
		seg.rel_cap = cap;
	}
	seg.rel[seg.nrel++] = slot;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct lm_segment_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void merge_excl(void)
{
	size_t n = 0;

	qsort(seg.excl, seg.nexcl, sizeof(*seg.excl), cmp_range);
	for (size_t i = 0; i < seg.nexcl; i++) {
		if (n && seg.excl[i].start <= seg.excl[n - 1].end) {
			if (seg.excl[i].end > seg.excl[n - 1].end)
				seg.excl[n - 1].end = seg.excl[i].end;
		} else {
			seg.excl[n++] = seg.excl[i];
		}
	}
	seg.nexcl = n;
}

/* Dynamic-section pointers: glibc relocates them in place for the main
 * program, other loaders may not; a PIE's link-time values are small. */
static uintptr_t dyn_ptr(uintptr_t v)
{
	return v < seg.base ? seg.base + v : v;
}

#ifdef SEG_R_COPY
static int scan_rela(const ElfW(Rela) *r, size_t bytes, size_t ent,
		     const ElfW(Sym) *symtab, size_t syment)
{
	int rc = 0;

	if (!r || !ent)
		return 0;
	for (size_t i = 0; i < bytes / ent && rc == 0; i++) {
		const ElfW(Rela) *x =
			(const ElfW(Rela) *)((const char *)r + i * ent);
		uintptr_t slot = seg.base + x->r_offset;
		unsigned long type = ELF64_R_TYPE(x->r_info);
		unsigned long sym = ELF64_R_SYM(x->r_info);

		if (type == SEG_R_COPY && symtab) {
			const ElfW(Sym) *s = (const ElfW(Sym) *)(
				(const char *)symtab + sym * syment);

			rc = push_excl(slot, slot + s->st_size);
		} else if (type == SEG_R_RELATIVE ||
			   type == SEG_R_IRELATIVE) {
			rc = push_rel(slot);
		} else if (sym != 0) {
			rc = push_excl(slot, slot + sizeof(uintptr_t));
		}
	}
	return rc;
}
#endif

/* DT_RELR: an address word, then bitmaps of the following words. */
static int scan_relr(const ElfW(Relr) *r, size_t bytes)
{
	uintptr_t where = 0;
	int rc = 0;

	for (size_t i = 0; r && i < bytes / sizeof(*r) && rc == 0; i++) {
		ElfW(Relr) e = r[i];

		if ((e & 1) == 0) {
			where = seg.base + e;
			rc = push_rel(where);
			where += sizeof(uintptr_t);
			continue;
		}
		for (unsigned b = 1; e >>= 1; b++)
			if ((e & 1) && rc == 0)
				rc = push_rel(where +
					      (b - 1) * sizeof(uintptr_t));
		where += (8 * sizeof(uintptr_t) - 1) * sizeof(uintptr_t);
	}
	return rc;
}

static int describe(void)
{
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Rela) *rela = NULL, *jmprel = NULL;
	const ElfW(Relr) *relr = NULL;
	const ElfW(Sym) *symtab = NULL;
	size_t relasz = 0, relaent = sizeof(ElfW(Rela)), pltrelsz = 0;
	size_t relrsz = 0, syment = sizeof(ElfW(Sym));
	int rc = 0;

	if (seg.described)
		return seg.described > 0 ? 0 : LM_EIO;
	if (!seg.program)
		read_program();
	seg.described = -1;
#ifndef SEG_R_COPY
	snprintf(seg.why, sizeof(seg.why),
		 "data segment shipping is not ported to this architecture");
	return LM_EIO;
#else
	seg.start = (uintptr_t)__data_start;
	for (size_t i = 0; i < seg.phnum; i++) {
		const ElfW(Phdr) *p = &seg.phdr[i];
		uintptr_t a = seg.base + p->p_vaddr;

		if (p->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)a;
		if (p->p_type == PT_LOAD && (p->p_flags & PF_W) &&
		    seg.start >= a && seg.start < a + p->p_memsz)
			seg.end = a + p->p_memsz; /* = _end */
	}
	if (!seg.start || !seg.end) {
		snprintf(seg.why, sizeof(seg.why),
			 "cannot find the executable's data segment "
			 "(__data_start %s)",
			 seg.start ? "outside its writable segment"
				   : "missing");
		return LM_EIO;
	}
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t v = dyn->d_un.d_val;

		switch (dyn->d_tag) {
		case DT_RELA: rela = (const void *)dyn_ptr(v); break;
		case DT_RELASZ: relasz = v; break;
		case DT_RELAENT: relaent = v; break;
		case DT_JMPREL: jmprel = (const void *)dyn_ptr(v); break;
		case DT_PLTRELSZ: pltrelsz = v; break;
		case DT_SYMTAB: symtab = (const void *)dyn_ptr(v); break;
		case DT_SYMENT: syment = v; break;
#ifdef DT_RELR
		case DT_RELR: relr = (const void *)dyn_ptr(v); break;
		case DT_RELRSZ: relrsz = v; break;
#endif
		default: break;
		}
	}
	rc = scan_rela(rela, relasz, relaent, symtab, syment);
	if (rc == 0)
		rc = scan_rela(jmprel, pltrelsz, relaent, symtab, syment);
	if (rc == 0)
		rc = scan_relr(relr, relrsz);
	if (rc == 0) /* our own state, when linked statically */
		rc = push_excl((uintptr_t)&seg, (uintptr_t)(&seg + 1));
	if (rc) {
		snprintf(seg.why, sizeof(seg.why), "out of memory");
		return rc;
	}
	merge_excl();
	qsort(seg.rel, seg.nrel, sizeof(*seg.rel), cmp_addr);
	seg.described = 1;
	return 0;
#endif
}

/* ---- API ---------------------------------------------------------------- */

static void set_err(char *err, size_t errlen, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", why);
}

/* Takes the module's lock and describes the segment (once): 0, or the
 * error with the reason in err (err may be NULL).  The lock is held on
 * return either way. */
static int lock_described(char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&seg.lock);
	rc = describe();
	if (rc)
		set_err(err, errlen, seg.why);
	return rc;
}

int lm_segment_layout(uintptr_t *start, uintptr_t *end,
		      const struct lm_segment_range **excl, size_t *nexcl,
		      char *err, size_t errlen)
{
	int rc;

	rc = lock_described(err, errlen);
	if (rc == 0) {
		*start = seg.start;
		*end = seg.end;
		*excl = seg.excl;
		*nexcl = seg.nexcl;
	}
	pthread_mutex_unlock(&seg.lock);
	return rc;
}

int lm_segment_pages(size_t page, uintptr_t *lo, uintptr_t *hi, char *err,
		     size_t errlen)
{
	uintptr_t os = (uintptr_t)sysconf(_SC_PAGESIZE), floor = 0, ceil = 0;
	int rc;

	rc = lock_described(err, errlen);
	if (rc)
		goto out;
	*lo = seg.start & ~(uintptr_t)(page - 1);
	*hi = (seg.end + page - 1) & ~(uintptr_t)(page - 1);
	for (size_t i = 0; i < seg.phnum; i++) {
		const ElfW(Phdr) *p = &seg.phdr[i];
		uintptr_t a = seg.base + p->p_vaddr, b = a + p->p_memsz;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_W) &&
		    seg.start >= a && seg.start < b) {
			if ((a & ~(os - 1)) > floor)
				floor = a & ~(os - 1);
			ceil = (b + os - 1) & ~(os - 1);
		}
		/* ld.so makes [a, b & ~(os - 1)) read-only after relocation */
		if (p->p_type == PT_GNU_RELRO && (b & ~(os - 1)) > floor &&
		    b <= seg.start)
			floor = b & ~(os - 1);
	}
	if (*lo < floor || *hi > ceil) {
		snprintf(err, errlen, "the pages of %zu bytes that hold the "
			 "program's data [%#lx, %#lx) reach beyond its "
			 "writable segment [%#lx, %#lx)", page,
			 (unsigned long)seg.start, (unsigned long)seg.end,
			 (unsigned long)floor, (unsigned long)ceil);
		rc = LM_EINVAL;
	}
out:
	pthread_mutex_unlock(&seg.lock);
	return rc;
}

void lm_segment_bytes_copy(void *dst, const void *src, size_t n)
{
	raw_copy(dst, src, n);
}

int lm_segment_bytes_nonzero(const void *a, size_t n)
{
	return raw_nonzero(a, n);
}

int lm_segment_exclude(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	int rc;

	rc = lock_described(NULL, 0);
	if (rc == 0 && (a < seg.start || len > seg.end - a))
		rc = LM_EINVAL;
	if (rc == 0 && (rc = push_excl(a, a + len)) == 0)
		merge_excl();
	pthread_mutex_unlock(&seg.lock);
	return rc;
}

/* The first piece of [a, b) outside the excluded ranges, as [*pa, *pb);
 * 0 when there is none.  *e is the first exclusion that may still
 * matter: it only moves forward, so calls must come in address order. */
static int seg_piece(uintptr_t a, uintptr_t b, size_t *e, uintptr_t *pa,
		     uintptr_t *pb)
{
	while (a < b) {
		while (*e < seg.nexcl && seg.excl[*e].end <= a)
			(*e)++;
		if (*e < seg.nexcl && seg.excl[*e].start <= a) {
			a = seg.excl[*e].end;
			continue;
		}
		*pa = a;
		*pb = *e < seg.nexcl && seg.excl[*e].start < b
			      ? seg.excl[*e].start
			      : b;
		return 1;
	}
	return 0;
}

struct seg_run {
	uintptr_t start, end;
};

/* The runs of the image: the blocks of the segment that hold a byte
 * other than zero outside the excluded ranges, neighbours merged.  On
 * success *runs is malloc'd (NULL when there are none). */
static int find_runs(struct seg_run **runs, size_t *nruns)
{
	struct seg_run *v = NULL;
	size_t n = 0, cap = 0, e = 0;

	for (uintptr_t a = seg.start, b; a < seg.end; a = b) {
		uintptr_t pa, pb;
		int nz = 0;

		b = (a & ~(uintptr_t)(LM_SEGMENT_BLOCK - 1)) + LM_SEGMENT_BLOCK;
		if (b > seg.end)
			b = seg.end;
		for (uintptr_t x = a; !nz && seg_piece(x, b, &e, &pa, &pb);
		     x = pb)
			nz = raw_nonzero((const uint8_t *)pa, pb - pa);
		if (!nz)
			continue;
		if (n && v[n - 1].end == a) {
			v[n - 1].end = b;
			continue;
		}
		if (n == cap) {
			size_t c = cap ? 2 * cap : 64;
			void *p = realloc(v, c * sizeof(*v));

			if (!p) {
				free(v);
				return LM_ENOMEM;
			}
			v = p;
			cap = c;
		}
		v[n++] = (struct seg_run){ a, b };
	}
	*runs = v;
	*nruns = n;
	return 0;
}

int lm_segment_capture(uint8_t **image, size_t *len, char *err,
		       size_t errlen)
{
	struct seg_header h;
	struct seg_run *runs = NULL;
	size_t nruns = 0, total = LM_SEGMENT_HEADER_BYTES, e = 0;
	uint8_t *img, *out;
	int rc;

	rc = lock_described(err, errlen);
	if (rc)
		goto out;
	rc = find_runs(&runs, &nruns);
	for (size_t i = 0; rc == 0 && i < nruns; i++)
		total += LM_SEGMENT_RUN_BYTES + (runs[i].end - runs[i].start);
	img = rc == 0 ? malloc(total) : NULL;
	if (!img) {
		set_err(err, errlen, "no memory for the data segment image");
		rc = LM_ENOMEM;
		goto out;
	}
	h = (struct seg_header){ SEG_MAGIC, seg.base, seg.start - seg.base,
				 seg.end - seg.start };
	memcpy(img, &h, sizeof(h));
	out = img + LM_SEGMENT_HEADER_BYTES;
	for (size_t i = 0; i < nruns; i++) {
		uint64_t rh[2] = { runs[i].start - seg.start,
				   runs[i].end - runs[i].start };
		uintptr_t pa, pb;

		memcpy(out, rh, sizeof(rh));
		out += LM_SEGMENT_RUN_BYTES;
		memset(out, 0, rh[1]); /* excluded bytes read as zero */
		for (uintptr_t x = runs[i].start;
		     seg_piece(x, runs[i].end, &e, &pa, &pb); x = pb)
			raw_copy(out + (pa - runs[i].start),
				 (const uint8_t *)pa, pb - pa);
		out += rh[1];
	}
	*image = img;
	*len = total;
out:
	pthread_mutex_unlock(&seg.lock);
	free(runs);
	return rc;
}

/* Moves the relative pointer slots, as applied, for a sender loaded
 * elsewhere.  Slots in excluded ranges were not written. */
static void relocate(uint64_t sender_base)
{
	uintptr_t delta = seg.base - (uintptr_t)sender_base;
	size_t e = 0;

	for (size_t i = 0; i < seg.nrel; i++) {
		uintptr_t slot = seg.rel[i], v;

		while (e < seg.nexcl && seg.excl[e].end <= slot)
			e++;
		if (e < seg.nexcl && seg.excl[e].start < slot + sizeof(v))
			continue;
		raw_copy((uint8_t *)&v, (const uint8_t *)slot, sizeof(v));
		if (v < sender_base + seg.lo || v >= sender_base + seg.hi)
			continue; /* reassigned to something else: keep */
		v += delta;
		raw_copy((uint8_t *)slot, (const uint8_t *)&v, sizeof(v));
	}
}

/* The run at image[*pos] (its bytes at image + *pos after the call). */
static void read_run(const uint8_t *image, size_t *pos, uint64_t *off,
		     uint64_t *n)
{
	memcpy(off, image + *pos, sizeof(*off));
	memcpy(n, image + *pos + 8, sizeof(*n));
	*pos += LM_SEGMENT_RUN_BYTES;
}

/* 0 when the runs of image[0, len) are in order, apart, not empty and
 * inside a segment of seg_len bytes and the image; else LM_EINVAL. */
static int check_runs(const uint8_t *image, size_t len, uint64_t seg_len)
{
	size_t pos = LM_SEGMENT_HEADER_BYTES;
	uint64_t at = 0, off, n;

	while (pos < len) {
		if (len - pos < LM_SEGMENT_RUN_BYTES)
			return LM_EINVAL;
		read_run(image, &pos, &off, &n);
		if (n == 0 || off < at || off > seg_len || n > seg_len - off ||
		    n > len - pos)
			return LM_EINVAL;
		at = off + n;
		pos += n;
	}
	return 0;
}

int lm_segment_apply(const uint8_t *image, size_t len)
{
	struct seg_header h;
	size_t pos = LM_SEGMENT_HEADER_BYTES, e = 0;
	uintptr_t at, pa, pb;
	int rc;

	rc = lock_described(NULL, 0);
	if (rc)
		goto out;
	if (!image || len < LM_SEGMENT_HEADER_BYTES) {
		rc = LM_EINVAL;
		goto out;
	}
	memcpy(&h, image, sizeof(h));
	if (h.magic != SEG_MAGIC || h.start != seg.start - seg.base ||
	    h.len != seg.end - seg.start ||
	    check_runs(image, len, h.len) != 0) {
		rc = LM_EINVAL;
		goto out;
	}
	at = seg.start;
	while (pos < len) {
		uint64_t off, n;
		uintptr_t ra;

		read_run(image, &pos, &off, &n);
		ra = seg.start + (uintptr_t)off;
		for (uintptr_t x = at; seg_piece(x, ra, &e, &pa, &pb); x = pb)
			raw_clear((uint8_t *)pa, pb - pa);
		for (uintptr_t x = ra; seg_piece(x, ra + n, &e, &pa, &pb);
		     x = pb)
			raw_copy((uint8_t *)pa, image + pos + (pa - ra),
				 pb - pa);
		at = ra + n;
		pos += n;
	}
	for (uintptr_t x = at; seg_piece(x, seg.end, &e, &pa, &pb); x = pb)
		raw_clear((uint8_t *)pa, pb - pa);
	if (h.base != seg.base)
		relocate(h.base);
out:
	pthread_mutex_unlock(&seg.lock);
	return rc;
}

static void ensure_program(void)
{
	pthread_mutex_lock(&seg.lock);
	if (!seg.program)
		read_program();
	pthread_mutex_unlock(&seg.lock);
}

uint64_t lm_segment_fn_offset(void (*fn)(void))
{
	ensure_program();
	return (uint64_t)((uintptr_t)fn - seg.base);
}

void (*lm_segment_fn_from_offset(uint64_t off))(void)
{
	ensure_program();
	for (size_t i = 0; i < seg.ntext; i++)
		if (off >= seg.text[i].start && off < seg.text[i].end)
			return (void (*)(void))(seg.base + (uintptr_t)off);
	return NULL;
}

int lm_segment_check_private(const void *lib_global)
{
	uintptr_t a = (uintptr_t)lib_global;
	int rc;

	rc = lock_described(NULL, 0);
	if (rc == 0 && a >= seg.start && a < seg.end)
		rc = LM_EINVAL;
	pthread_mutex_unlock(&seg.lock);
	return rc;
}
