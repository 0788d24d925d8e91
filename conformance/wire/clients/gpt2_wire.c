/* gpt2_wire.c - GPT-2's token + position embedding and its tied output head, served over the
 * gpt2-conformance wire protocol (version 1). C11 and POSIX, nothing else:
 *
 *     cc -std=c11 -O2 -o gpt2_wire gpt2_wire.c -lm
 *     gpt2-conformance run --exec ./gpt2_wire
 *
 *     h[b, t]  = wte[ids[b, t]] + wpe[past_length + t]      wte [50257, d], wpe [1024, d]
 *     logits   = h_final @ wte^T                            the head is wte itself (tied)
 *
 * The suite writes requests to stdin and reads one response per request from stdout. A message
 * is one line of JSON (the header) followed by the raw bytes of the arrays it lists; a large
 * array may be a file in the shared-memory folder the hello offers instead: the suite's tables come
 * as files this client maps, and it writes its large answers straight into new files there. Anything
 * meant for a human goes to stderr: stdout carries the protocol only. The process ends at the end
 * of stdin.
 * The protocol: the package's wire/protocol-1.schema.json and docs/any-language.md.
 *
 * Copy it and put your own implementation behind the same requests. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "this client reads and writes little-endian arrays as they are in memory"
#endif

enum { N_VOCAB = 50257, N_CTX = 1024, MAX_HEADER = 65536, MAX_NODES = 1024, HEAD_ROWS = 64 };
static const size_t SHM_MIN_BYTES = 1 << 20; /* smaller arrays travel in the pipe */

/* ---- the model ------------------------------------------------------------------------ */
static long long d = 768;           /* n_embd, from the hello's config */
static float *wte, *wpe;            /* [N_VOCAB, d] and [N_CTX, d], owned */
static size_t wte_mapped, wpe_mapped; /* their bytes where they are mappings of the suite's files */
static char shm_dir[4096];          /* the shared folder the hello offered ("" : none) */

/* ---- a tiny JSON reader: enough for the suite's request headers ------------------------ */
typedef struct Json {
    char type;                      /* o(bject) a(rray) s(tring) n(umber) t(rue) f(alse) z (null) */
    const char *text; size_t len;   /* a string's raw characters, or a number's digits */
    const char *key; size_t keylen; /* its name inside an object */
    struct Json *child, *next;
} Json;
static Json nodes[MAX_NODES];
static int n_nodes;

static const char *skip(const char *p) { while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++; return p; }

static const char *parse(const char *p, Json **out) {
    if (n_nodes == MAX_NODES) return NULL;
    Json *j = &nodes[n_nodes++];
    memset(j, 0, sizeof *j);
    *out = j;
    p = skip(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        j->type = *p == '{' ? 'o' : 'a';
        Json **tail = &j->child;
        p = skip(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            const char *key = NULL; size_t keylen = 0;
            if (j->type == 'o') {
                Json *k;
                if (*(p = skip(p)) != '"' || !(p = parse(p, &k))) return NULL;
                key = k->text; keylen = k->len; n_nodes--; /* the key node is not kept */
                if (*(p = skip(p)) != ':') return NULL;
                p++;
            }
            if (!(p = parse(p, tail))) return NULL;
            (*tail)->key = key; (*tail)->keylen = keylen;
            tail = &(*tail)->next;
            p = skip(p);
            if (*p == ',') { p++; continue; }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    if (*p == '"') {
        j->type = 's'; j->text = ++p;
        while (*p && *p != '"') p += (*p == '\\' && p[1]) ? 2 : 1;
        if (!*p) return NULL;
        j->len = (size_t)(p - j->text);
        return p + 1;
    }
    if (!strncmp(p, "true", 4)) { j->type = 't'; return p + 4; }
    if (!strncmp(p, "false", 5)) { j->type = 'f'; return p + 5; }
    if (!strncmp(p, "null", 4)) { j->type = 'z'; return p + 4; }
    j->type = 'n'; j->text = p;
    while (*p && strchr("+-0123456789.eE", *p)) p++;
    j->len = (size_t)(p - j->text);
    return j->len ? p : NULL;
}

static Json *get(const Json *o, const char *key) {
    for (Json *c = o ? o->child : NULL; c; c = c->next)
        if (c->keylen == strlen(key) && !memcmp(c->key, key, c->keylen)) return c;
    return NULL;
}
static int is(const Json *s, const char *text) { return s && s->type == 's' && s->len == strlen(text) && !memcmp(s->text, text, s->len); }
static long long integer(const Json *n) { return n ? strtoll(n->text, NULL, 10) : 0; }

/* ---- errors: the response a refused request gets ---------------------------------------- */
static char err_kind[64], err_msg[1024];
static int fail(const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    snprintf(err_kind, sizeof err_kind, "%s", kind);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- reading stdin: header lines and array bytes through one buffer --------------------- */
static unsigned char in_buf[1 << 16];
static size_t in_pos, in_len;

static int fill(void) {
    ssize_t n;
    do n = read(0, in_buf, sizeof in_buf); while (n < 0 && errno == EINTR);
    in_pos = 0; in_len = n > 0 ? (size_t)n : 0;
    return n > 0;
}
static char *read_line(void) { /* NULL at the end of stdin */
    static char line[MAX_HEADER + 1];
    size_t n = 0;
    for (;;) {
        if (in_pos == in_len && !fill()) return NULL;
        char c = (char)in_buf[in_pos++];
        if (c == '\n') { line[n] = 0; return line; }
        if (n == MAX_HEADER) return NULL;
        line[n++] = c;
    }
}
static int read_exact(int fd, unsigned char *dst, size_t n) {
    if (fd == 0) {
        size_t have = in_len - in_pos < n ? in_len - in_pos : n;
        memcpy(dst, in_buf + in_pos, have);
        in_pos += have; dst += have; n -= have;
    }
    while (n) {
        ssize_t got = read(fd, dst, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        dst += got; n -= (size_t)got;
    }
    return 0;
}
static void write_all(const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t put = write(1, c, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) exit(1); /* the suite is gone */
        c += put; n -= (size_t)put;
    }
}

/* ---- arrays ------------------------------------------------------------------------------ */
typedef struct {
    char name[32], dtype[16];
    int ndim; long long shape[8];
    size_t nbytes;
    void *data;                     /* malloc'd, or mapped from a file of the shared folder */
    int mapped;
    char file[160];                 /* the file an answer is written to ("" : the pipe) */
} Array;
static Array in[4], out[2];
static int n_in, n_out;

static void copy_text(char *dst, size_t size, const Json *s) {
    size_t n = s && s->type == 's' ? s->len : 0;
    if (n >= size) n = size - 1;
    memcpy(dst, s ? s->text : "", n);
    dst[n] = 0;
}

static void release(void *data, size_t mapped) { if (mapped) munmap(data, mapped); else free(data); }

static int read_array(Array *a, const Json *desc) { /* every array of a request is read, even one refused */
    memset(a, 0, sizeof *a);
    copy_text(a->name, sizeof a->name, get(desc, "name"));
    copy_text(a->dtype, sizeof a->dtype, get(desc, "dtype"));
    for (Json *s = get(desc, "shape") ? get(desc, "shape")->child : NULL; s && a->ndim < 8; s = s->next)
        a->shape[a->ndim++] = integer(s);
    a->nbytes = (size_t)integer(get(desc, "nbytes"));
    Json *file = get(desc, "file");
    if (file && a->nbytes) { /* mapped, not read: the suite never changes its files, and a private
                                mapping copies a page only where this process writes to it */
        char path[4300], name[160];
        copy_text(name, sizeof name, file);
        snprintf(path, sizeof path, "%s/%s", shm_dir, name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) return -1;
        a->data = mmap(NULL, a->nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        close(fd);
        a->mapped = a->data != MAP_FAILED;
        return a->mapped ? 0 : -1;
    }
    a->data = malloc(a->nbytes ? a->nbytes : 1);
    if (!a->data) { fprintf(stderr, "gpt2_wire: out of memory for %zu bytes\n", a->nbytes); exit(1); }
    return read_exact(0, a->data, a->nbytes);
}

static const char *shape_text(const Array *a) { /* as Python prints a shape: (3,), (2, 768) */
    static char s[160];
    int k = snprintf(s, sizeof s, "(");
    for (int i = 0; i < a->ndim; i++) k += snprintf(s + k, sizeof s - k, i ? ", %lld" : "%lld", a->shape[i]);
    snprintf(s + k, sizeof s - k, a->ndim == 1 ? ",)" : ")");
    return s;
}

/* An answer's array: in a new file of the shared folder when it is large and one was offered (the
 * method computes into the mapping and the suite maps the file: nothing is copied), else in memory,
 * written to stdout after the header. */
static float *answer(const char *name, int ndim, long long d0, long long d1, long long d2) {
    static unsigned serial;
    Array *a = &out[n_out++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->dtype, sizeof a->dtype, "float32");
    long long dims[3] = {d0, d1, d2};
    a->ndim = ndim; a->nbytes = 4;
    for (int i = 0; i < ndim; i++) a->nbytes *= (size_t)(a->shape[i] = dims[i]);
    if (shm_dir[0] && a->nbytes >= SHM_MIN_BYTES) {
        char path[4300];
        snprintf(a->file, sizeof a->file, "c%ld-%u.bin", (long)getpid(), serial++);
        snprintf(path, sizeof path, "%s/%s", shm_dir, a->file);
        int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && ftruncate(fd, (off_t)a->nbytes) == 0) {
            a->data = mmap(NULL, a->nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (a->data != MAP_FAILED) return a->data;
        } else if (fd >= 0) close(fd);
        unlink(path);
        a->file[0] = 0; /* no room there: the pipe */
    }
    a->data = malloc(a->nbytes ? a->nbytes : 1);
    if (!a->data) { fprintf(stderr, "gpt2_wire: out of memory for %zu bytes\n", a->nbytes); exit(1); }
    return a->data;
}

static void drop_answers(void) { /* after an error: nothing of them is sent */
    for (int i = 0; i < n_out; i++) {
        if (out[i].file[0]) {
            char path[4300];
            munmap(out[i].data, out[i].nbytes);
            snprintf(path, sizeof path, "%s/%s", shm_dir, out[i].file);
            unlink(path);
        } else free(out[i].data);
    }
    n_out = 0;
}

static void send_answers(void) {
    static char head[8192];
    int k = snprintf(head, sizeof head, "{\"ok\":true,\"arrays\":[");
    for (int i = 0; i < n_out; i++) {
        Array *a = &out[i];
        k += snprintf(head + k, sizeof head - k, "%s{\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[", i ? "," : "", a->name, a->dtype);
        for (int j = 0; j < a->ndim; j++) k += snprintf(head + k, sizeof head - k, j ? ",%lld" : "%lld", a->shape[j]);
        k += snprintf(head + k, sizeof head - k, "],\"byteorder\":\"little\",\"nbytes\":%zu", a->nbytes);
        k += snprintf(head + k, sizeof head - k, a->file[0] ? ",\"file\":\"%s\"}" : "}", a->file);
    }
    k += snprintf(head + k, sizeof head - k, "]}\n");
    write_all(head, (size_t)k);
    for (int i = 0; i < n_out; i++) {
        if (out[i].file[0]) munmap(out[i].data, out[i].nbytes);
        else { write_all(out[i].data, out[i].nbytes); free(out[i].data); }
    }
    n_out = 0;
}

/* ---- the checks every call makes, each refusal naming the value and the rule ------------- */
static int check_past_length(const Json *arg, long long *past) {
    *past = 0;
    if (!arg) return 0; /* embed(ids): the default, 0 */
    Json *type = get(arg, "type"), *value = get(arg, "value");
    if (!is(type, "int")) {
        const char *shown = value && value->type == 't' ? "True" : value && value->type == 'f' ? "False" : NULL;
        if (shown) return fail("TypeError", "past_length=%s (bool) must be an integer >= 0", shown);
        return fail("TypeError", "past_length=%.*s (float) must be an integer >= 0", (int)(value ? value->len : 0), value ? value->text : "");
    }
    *past = integer(value);
    if (*past < 0) return fail("ValueError", "past_length=%lld must be >= 0", *past);
    return 0;
}

static int check_ids(const Array *ids, long long past) {
    int wide = !strcmp(ids->dtype, "int64");
    if (!wide && strcmp(ids->dtype, "int32")) return fail("TypeError", "ids must be an integer array (int32 or int64), got dtype %s", ids->dtype);
    if (ids->ndim != 2) return fail("ValueError", "ids must have rank 2 [B, T], got shape %s", shape_text(ids));
    long long batch = ids->shape[0], seq = ids->shape[1];
    if (seq > 0 && past + seq > N_CTX) {
        long long first = past > N_CTX ? past : N_CTX;
        return fail("PositionOutOfRange", "position %lld is outside the wpe table [0, %d): past_length=%lld + T=%lld tokens",
                    first, N_CTX, past, seq);
    }
    for (long long i = 0; i < batch * seq; i++) {
        long long id = wide ? ((const int64_t *)ids->data)[i] : ((const int32_t *)ids->data)[i];
        if (id < 0 || id >= N_VOCAB)
            return fail("TokenOutOfRange", "token id %lld at ids[%lld, %lld] is outside the wte table [0, %d)", id,
                        i / seq, i % seq, N_VOCAB);
    }
    return 0;
}

static long long token(const Array *ids, long long i) {
    return !strcmp(ids->dtype, "int64") ? ((const int64_t *)ids->data)[i] : ((const int32_t *)ids->data)[i];
}

static int check_float(const Array *a, int ndim, const long long *shape, const char *want) {
    if (strcmp(a->dtype, "float32")) return fail("TypeError", "%s.dtype=%s, but should be float32", a->name, a->dtype);
    int ok = a->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = shape[i] < 0 || a->shape[i] == shape[i];
    return ok ? 0 : fail("ValueError", "%s.shape=%s, but should be %s", a->name, shape_text(a), want);
}

/* ---- the calls -------------------------------------------------------------------------- */
static void embed_into(float *h, const Array *ids, long long past) {
    long long seq = ids->shape[1], n = ids->shape[0] * seq;
    for (long long i = 0; i < n; i++) {
        const float *row = wte + token(ids, i) * d, *pos = wpe + (past + i % seq) * d;
        for (long long j = 0; j < d; j++) h[i * d + j] = row[j] + pos[j]; /* one float32 addition each */
    }
}

static int embed(const Json *req) {
    long long past;
    if (check_past_length(get(req, "past_length"), &past) || check_ids(&in[0], past)) return -1;
    embed_into(answer("h", 3, in[0].shape[0], in[0].shape[1], d), &in[0], past);
    return 0;
}

static float dot(const float *a, const float *b, long long n) { /* eight running sums: vectorisable */
    float s[8] = {0};
    long long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    float rest = 0;
    for (; i < n; i++) rest += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + rest;
}

static int logits(void) {
    char want[64];
    snprintf(want, sizeof want, "(B, T, %lld)", d);
    if (check_float(&in[0], 3, (long long[]){-1, -1, d}, want)) return -1;
    const float *h = in[0].data;
    long long n = in[0].shape[0] * in[0].shape[1];
    float *out_ = answer("logits", 3, in[0].shape[0], in[0].shape[1], N_VOCAB);
    for (long long r0 = 0; r0 < N_VOCAB; r0 += HEAD_ROWS) { /* a block of wte rows stays in cache for every h row */
        long long r1 = r0 + HEAD_ROWS < N_VOCAB ? r0 + HEAD_ROWS : N_VOCAB;
        for (long long i = 0; i < n; i++)
            for (long long r = r0; r < r1; r++) out_[i * N_VOCAB + r] = dot(h + i * d, wte + r * d, d);
    }
    return 0;
}

static int gradients(const Json *req) {
    long long past;
    if (check_past_length(get(req, "past_length"), &past) || check_ids(&in[0], past)) return -1;
    long long batch = in[0].shape[0], seq = in[0].shape[1], n = batch * seq;
    if (check_float(&in[1], 3, (long long[]){batch, seq, d}, "[B, T, d] as ids") ||
        check_float(&in[2], 3, (long long[]){batch, seq, N_VOCAB}, "[B, T, 50257] as ids")) return -1;
    const float *ch = in[1].data, *cl = in[2].data;
    float *h = malloc((size_t)(n * d + 1) * 4), *dh = malloc((size_t)(n * d + 1) * 4);
    if (!h || !dh) { free(h); free(dh); return fail("RuntimeError", "out of memory for gradients of %lld tokens", n); }
    embed_into(h, &in[0], past);
    memcpy(dh, ch, (size_t)(n * d) * 4);
    float *gw = answer("grad_wte", 2, N_VOCAB, d, 0), *gp = answer("grad_wpe", 2, N_CTX, d, 0);
    for (long long r = 0; r < N_VOCAB; r++) { /* L = <ch, h> + <cl, h wte^T>: the head's two roles */
        float *g = gw + r * d;
        const float *w = wte + r * d;
        memset(g, 0, (size_t)d * 4);
        for (long long i = 0; i < n; i++) {
            float c = cl[i * N_VOCAB + r];
            if (c == 0) continue;
            for (long long j = 0; j < d; j++) { dh[i * d + j] += c * w[j]; g[j] += c * h[i * d + j]; }
        }
    }
    memset(gp, 0, (size_t)(N_CTX * d) * 4);
    for (long long i = 0; i < n; i++) { /* the gather's role: dL/dh back to the rows it read */
        float *g = gw + token(&in[0], i) * d, *p = gp + (past + i % seq) * d;
        for (long long j = 0; j < d; j++) { g[j] += dh[i * d + j]; p[j] += dh[i * d + j]; }
    }
    free(h); free(dh);
    return 0;
}

static int load_tables(void) {
    char want_wte[64], want_wpe[64];
    snprintf(want_wte, sizeof want_wte, "(%d, %lld)", N_VOCAB, d);
    snprintf(want_wpe, sizeof want_wpe, "(%d, %lld)", N_CTX, d);
    if (check_float(&in[0], 2, (long long[]){N_VOCAB, d}, want_wte) || check_float(&in[1], 2, (long long[]){N_CTX, d}, want_wpe)) return -1;
    release(wte, wte_mapped); release(wpe, wpe_mapped);
    wte = in[0].data; wpe = in[1].data; /* the arrays just read are ours: no copy */
    wte_mapped = in[0].mapped ? in[0].nbytes : 0;
    wpe_mapped = in[1].mapped ? in[1].nbytes : 0;
    in[0].data = in[1].data = NULL;
    return 0;
}

static int tables(void) {
    memcpy(answer("wte", 2, N_VOCAB, d, 0), wte, (size_t)(N_VOCAB * d) * 4);
    memcpy(answer("wpe", 2, N_CTX, d, 0), wpe, (size_t)(N_CTX * d) * 4);
    return 0;
}

static uint64_t rng_state;
static double uniform(void) { /* splitmix64, 53 bits, in (0, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((double)((z ^ (z >> 31)) >> 11) + 0.5) / 9007199254740992.0;
}
static void normals(float *x, long long n, double std) { /* Box-Muller: plain, not truncated */
    for (long long i = 0; i < n; i += 2) {
        double r = std * sqrt(-2 * log(uniform())), a = 6.283185307179586 * uniform();
        x[i] = (float)(r * cos(a));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(a));
    }
}

static int init_tables(const Json *req) {
    Json *seed = get(req, "seed");
    if (!is(get(seed, "type"), "int")) return fail("TypeError", "seed must be an integer");
    rng_state = (uint64_t)integer(get(seed, "value"));
    normals(wte, N_VOCAB * d, 0.02); /* model(): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2) */
    normals(wpe, N_CTX * d, 0.01);
    return 0;
}

static int assign_wte_row(const Json *req) {
    Json *index = get(req, "index");
    long long row = integer(get(index, "value"));
    if (!is(get(index, "type"), "int")) return fail("TypeError", "index must be an integer");
    if (row < 0 || row >= N_VOCAB) return fail("IndexError", "row %lld is outside the wte table [0, %d)", row, N_VOCAB);
    char want[32];
    snprintf(want, sizeof want, "(%lld,)", d);
    if (check_float(&in[0], 1, (long long[]){d}, want)) return -1;
    memcpy(wte + row * d, in[0].data, (size_t)d * 4);
    return 0;
}

static int hello(const Json *req) {
    Json *config = get(req, "config"), *shm = get(req, "shm");
    if (config && config->type == 'o') {
        Json *dtype = get(config, "dtype");
        if (!is(dtype, "float32"))
            return fail("ValueError", "dtype %.*s is not claimed: float32 only", dtype ? (int)dtype->len : 0, dtype ? dtype->text : "");
        d = integer(get(config, "n_embd"));
        release(wte, wte_mapped); release(wpe, wpe_mapped);
        wte_mapped = wpe_mapped = 0;
        wte = calloc((size_t)(N_VOCAB * d), 4); /* zeros until load_tables or init_tables */
        wpe = calloc((size_t)(N_CTX * d), 4);
        if (!wte || !wpe) return fail("RuntimeError", "out of memory for tables of d = %lld", d);
    }
    shm_dir[0] = 0;
    if (shm && shm->type == 's' && shm->len < sizeof shm_dir) copy_text(shm_dir, sizeof shm_dir, shm);
    char head[1024];
    int k = snprintf(head, sizeof head,
        "{\"ok\":true,\"protocol\":1,\"implementation\":\"gpt2-wire-c\",\"version\":\"1.0\","
        "\"capabilities\":{\"dtypes\":[\"float32\"],\"devices\":[\"cpu\"],\"sizes\":[768,1024,1280,1600],"
        "\"kv_cache\":true,\"tied_head\":true,\"init\":true,\"gradients\":true,\"mutable_tables\":true},"
        "\"errors\":{\"TokenOutOfRange\":\"IndexError\",\"PositionOutOfRange\":\"IndexError\"},\"shm\":%s}\n",
        shm_dir[0] ? "true" : "false");
    write_all(head, (size_t)k);
    return 1; /* answered */
}

static int parameters(void) {
    char head[256];
    int k = snprintf(head, sizeof head, "{\"ok\":true,\"parameters\":{\"wte\":[%d,%lld],\"wpe\":[%d,%lld]}}\n", N_VOCAB, d, N_CTX, d);
    write_all(head, (size_t)k);
    return 1;
}

static void send_error(void) {
    char head[2048];
    int k = snprintf(head, sizeof head, "{\"ok\":false,\"error\":{\"kind\":\"%s\",\"message\":\"", err_kind);
    for (const char *c = err_msg; *c && k < (int)sizeof head - 8; c++) { /* JSON-escape the message */
        if (*c == '"' || *c == '\\') head[k++] = '\\';
        head[k++] = (*c == '\n' || *c == '\t') ? ' ' : *c;
    }
    k += snprintf(head + k, sizeof head - k, "\"}}\n");
    write_all(head, (size_t)k);
}

int main(void) {
    char *line;
    while ((line = read_line())) {
        Json *req;
        n_nodes = 0;
        if (!parse(line, &req) || req->type != 'o') { fprintf(stderr, "gpt2_wire: a header that is not JSON\n"); return 1; }
        n_in = 0;
        for (Json *a = get(req, "arrays") ? get(req, "arrays")->child : NULL; a && n_in < 4; a = a->next)
            if (read_array(&in[n_in++], a)) { fprintf(stderr, "gpt2_wire: the request ended inside an array\n"); return 1; }
        Json *call = get(req, "call");
        int expected = is(call, "load_tables") ? 2 : is(call, "gradients") ? 3 : is(call, "embed") || is(call, "logits") || is(call, "assign_wte_row") ? 1 : 0;
        int status = n_in < expected ? fail("ValueError", "%.*s needs %d array(s), got %d", (int)call->len, call->text, expected, n_in)
                   : is(call, "hello") ? hello(req)
                   : is(call, "parameters") ? parameters()
                   : is(call, "load_tables") ? load_tables()
                   : is(call, "tables") ? tables()
                   : is(call, "embed") ? embed(req)
                   : is(call, "logits") ? logits()
                   : is(call, "gradients") ? gradients(req)
                   : is(call, "init_tables") ? init_tables(req)
                   : is(call, "assign_wte_row") ? assign_wte_row(req)
                   : fail("ValueError", "unknown call");
        if (status < 0) { drop_answers(); send_error(); }
        else if (status == 0) send_answers();
        for (int i = 0; i < n_in; i++) if (in[i].data) release(in[i].data, in[i].mapped ? in[i].nbytes : 0);
    }
    return 0;
}
