/* The indexer's hottest loops, compiled: counting terms, packing them into postings, and
 * laying the postings out as rows to insert.
 *
 * Both have their specification in Python (tokenizer.count_terms_python,
 * postings.PackedPostings.from_counts_python, value_batches_python); tests compare the two on generated input, and
 * the Python runs where this module was not built (no C compiler at install).
 *
 * `count_terms(units, words_of, expand)` gives what `tokenizer._count_terms_python(units)` gives
 * (the same counts per unit; term ids may be numbered in another order): each unit is a
 * sequence of str; an ASCII text is scanned here for its words (`_ASCII_CHUNK`), any other
 * text is handed to `words_of(text)`, which returns its words. Each distinct ASCII word is
 * expanded here into its terms by `tokenizer._word_terms`'s rules (its levels and case
 * humps); any other word by `expand(word)`. Terms are counted per unit in a dense array.
 *
 * Returns (terms, bounds, term_ids, tfs, lengths): a list of str, and four bytearrays of
 * int64, int32, int32 and int64 in native order (numpy views them without a copy).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WHOLE 128 /* tokenizer._MAX_WHOLE */

/* ---- growable arrays ---------------------------------------------------------------- */

typedef struct {
    int32_t *v;
    Py_ssize_t n, cap;
} I32Vec;

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} I64Vec;

static int grow(void **data, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = PyMem_Realloc(*data, (size_t)c * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = p;
    *cap = c;
    return 0;
}

static inline int i32_push(I32Vec *a, int32_t x) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, a->n + 1, sizeof(int32_t)) < 0) return -1;
    a->v[a->n++] = x;
    return 0;
}

static inline int i64_push(I64Vec *a, int64_t x) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, a->n + 1, sizeof(int64_t)) < 0) return -1;
    a->v[a->n++] = x;
    return 0;
}

/* ---- a table of byte strings, numbered 0, 1, 2... in order of insertion ------------- */

typedef struct {
    char *arena;
    Py_ssize_t arena_n, arena_cap;
    Py_ssize_t *offsets;
    Py_ssize_t *lengths;
    uint64_t *hashes;
    Py_ssize_t count, ids_cap;
    int32_t *slots; /* -1: empty */
    Py_ssize_t mask;
} Table;

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int table_init(Table *t) {
    memset(t, 0, sizeof(*t));
    t->mask = 1023;
    t->slots = PyMem_Malloc(sizeof(int32_t) * (size_t)(t->mask + 1));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(t->slots, 0xff, sizeof(int32_t) * (size_t)(t->mask + 1));
    return 0;
}

static void table_free(Table *t) {
    PyMem_Free(t->arena);
    PyMem_Free(t->offsets);
    PyMem_Free(t->lengths);
    PyMem_Free(t->hashes);
    PyMem_Free(t->slots);
}

static int table_rehash(Table *t) {
    Py_ssize_t size = (t->mask + 1) * 2;
    int32_t *slots = PyMem_Malloc(sizeof(int32_t) * (size_t)size);
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xff, sizeof(int32_t) * (size_t)size);
    Py_ssize_t mask = size - 1;
    for (Py_ssize_t id = 0; id < t->count; id++) {
        Py_ssize_t at = (Py_ssize_t)(t->hashes[id] & (uint64_t)mask);
        while (slots[at] >= 0) at = (at + 1) & mask;
        slots[at] = (int32_t)id;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* The id of `s[:n]`, inserted if new (`*added` tells); -1 on error. */
static Py_ssize_t table_id(Table *t, const char *s, Py_ssize_t n, int *added) {
    uint64_t h = hash_bytes(s, n);
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)t->mask);
    for (;;) {
        int32_t id = t->slots[at];
        if (id < 0) break;
        if (t->hashes[id] == h && t->lengths[id] == n && memcmp(t->arena + t->offsets[id], s, (size_t)n) == 0) {
            *added = 0;
            return id;
        }
        at = (at + 1) & t->mask;
    }
    if (t->count >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many distinct strings in one call");
        return -1;
    }
    if (grow((void **)&t->arena, &t->arena_cap, t->arena_n + n + 1, 1) < 0) return -1;
    if (t->count == t->ids_cap) {
        Py_ssize_t cap = t->ids_cap;
        if (grow((void **)&t->offsets, &cap, t->count + 1, sizeof(Py_ssize_t)) < 0) return -1;
        cap = t->ids_cap;
        if (grow((void **)&t->lengths, &cap, t->count + 1, sizeof(Py_ssize_t)) < 0) return -1;
        cap = t->ids_cap;
        if (grow((void **)&t->hashes, &cap, t->count + 1, sizeof(uint64_t)) < 0) return -1;
        t->ids_cap = cap;
    }
    Py_ssize_t id = t->count++;
    memcpy(t->arena + t->arena_n, s, (size_t)n);
    t->offsets[id] = t->arena_n;
    t->lengths[id] = n;
    t->hashes[id] = h;
    t->arena_n += n;
    t->slots[at] = (int32_t)id;
    *added = 1;
    if (t->count * 2 > t->mask + 1 && table_rehash(t) < 0) return -1;
    return id;
}

/* ---- ASCII character classes -------------------------------------------------------- */

static inline int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static inline int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static inline int is_digit(char c) { return c >= '0' && c <= '9'; }
static inline int is_word(char c) { return is_upper(c) || is_lower(c) || is_digit(c) || c == '_'; }
static inline int is_lower_or_digit(char c) { return is_lower(c) || is_digit(c); }

/* ---- the expansion of one ASCII word (tokenizer._word_terms) ------------------------ */

typedef struct {
    Py_ssize_t start, end;
} Span;

typedef struct {
    Span *v;
    Py_ssize_t n, cap;
} SpanVec;

static inline int span_push(SpanVec *a, Py_ssize_t start, Py_ssize_t end) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, a->n + 1, sizeof(Span)) < 0) return -1;
    a->v[a->n].start = start;
    a->v[a->n].end = end;
    a->n++;
    return 0;
}

typedef struct {
    Table words;
    Table terms;
    I64Vec word_first;  /* word w's terms: term_of_word[word_first[w] : word_first[w + 1]] */
    I32Vec term_of_word;
    SpanVec out, pieces, finer;
    char *lowered;
    Py_ssize_t lowered_cap;
} Counter;

/* Add the term `w[start:end]`, lowered, to the current word's terms, if it is kept: a single
 * letter, or two characters or more that are not all underscores. */
static int add_term(Counter *c, const char *w, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t n = end - start;
    if (n == 0) return 0;
    if (n == 1) {
        if (!is_upper(w[start]) && !is_lower(w[start])) return 0;
    } else {
        Py_ssize_t i = start;
        while (i < end && w[i] == '_') i++;
        if (i == end) return 0;
    }
    if (grow((void **)&c->lowered, &c->lowered_cap, n, 1) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = w[start + i];
        c->lowered[i] = is_upper(ch) ? (char)(ch + 32) : ch;
    }
    int added;
    Py_ssize_t id = table_id(&c->terms, c->lowered, n, &added);
    if (id < 0) return -1;
    return i32_push(&c->term_of_word, (int32_t)id);
}

/* _CAMEL.findall(w[start:end]) for a piece of letters and digits, appended to `humps`. */
static int case_humps(const char *w, Py_ssize_t start, Py_ssize_t end, SpanVec *humps) {
    Py_ssize_t i = start;
    while (i < end) {
        Py_ssize_t k;
        if (is_upper(w[i])) {
            Py_ssize_t j = i;
            while (j < end && is_upper(w[j])) j++;
            Py_ssize_t run = j - i;
            if (run >= 2 && j < end && w[j] == 's' && (j + 1 >= end || !is_lower(w[j + 1]))) {
                k = j + 1; /* [A-Z]{2,}s(?![a-z]) */
            } else if (run >= 2 && j < end && is_lower(w[j])) {
                k = j - 1; /* [A-Z]+(?=[A-Z][a-z]) */
            } else if (i + 1 < end && is_lower_or_digit(w[i + 1])) {
                k = i + 1; /* [A-Z]?[a-z0-9]+ */
                while (k < end && is_lower_or_digit(w[k])) k++;
            } else {
                k = j; /* [A-Z]+[0-9]* */
                while (k < end && is_digit(w[k])) k++;
            }
        } else if (is_lower_or_digit(w[i])) {
            k = i; /* [a-z0-9]+ */
            while (k < end && is_lower_or_digit(w[k])) k++;
        } else {
            i++; /* no alternative starts here */
            continue;
        }
        if (span_push(humps, i, k) < 0) return -1;
        i = k;
    }
    return 0;
}

/* Split every piece at the separators `is_sep` finds (returning the separator's length, 0
 * for none), adding the parts of a piece that changes to `out` (`_split_each`). */
typedef Py_ssize_t (*SeparatorAt)(const char *w, Py_ssize_t i, Py_ssize_t end);

static Py_ssize_t slash_at(const char *w, Py_ssize_t i, Py_ssize_t end) {
    if (w[i] == '/') return 1;
    if (w[i] == ':' && i + 1 < end && w[i + 1] == ':') return 2;
    return 0;
}

static Py_ssize_t dot_at(const char *w, Py_ssize_t i, Py_ssize_t end) {
    (void)end;
    return (w[i] == '.' || w[i] == '-') ? 1 : 0;
}

static Py_ssize_t underscore_at(const char *w, Py_ssize_t i, Py_ssize_t end) {
    (void)end;
    return w[i] == '_' ? 1 : 0;
}

static int split_each(Counter *c, const char *w, SeparatorAt sep_at) {
    c->finer.n = 0;
    for (Py_ssize_t p = 0; p < c->pieces.n; p++) {
        Py_ssize_t start = c->pieces.v[p].start, end = c->pieces.v[p].end;
        Py_ssize_t first_part = c->finer.n;
        int split = 0;
        Py_ssize_t part = start, i = start;
        while (i < end) {
            Py_ssize_t s = sep_at(w, i, end);
            if (s == 0) {
                i++;
                continue;
            }
            split = 1;
            if (i > part && span_push(&c->finer, part, i) < 0) return -1;
            i += s;
            part = i;
        }
        if (end > part && span_push(&c->finer, part, end) < 0) return -1;
        if (split) { /* the parts differ from [piece] */
            for (Py_ssize_t q = first_part; q < c->finer.n; q++) {
                if (span_push(&c->out, c->finer.v[q].start, c->finer.v[q].end) < 0) return -1;
            }
        }
    }
    SpanVec swap = c->pieces;
    c->pieces = c->finer;
    c->finer = swap;
    return 0;
}

static void case_of(const char *w, Py_ssize_t start, Py_ssize_t end, int *upper, int *lower) {
    *upper = *lower = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        *upper |= is_upper(w[i]);
        *lower |= is_lower(w[i]);
    }
}

static int expand_ascii(Counter *c, const char *w, Py_ssize_t n) {
    int has_slash = 0, has_dot = 0, has_underscore = 0, upper, lower;
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = w[i];
        has_slash |= (ch == '/' || ch == ':');
        has_dot |= (ch == '.' || ch == '-');
        has_underscore |= (ch == '_');
    }
    case_of(w, 0, n, &upper, &lower);
    if (!has_slash && !has_dot && !has_underscore && !upper) {
        /* lowercase letters and digits: the word itself, unless a single digit */
        return (n > 1 || is_lower(w[0])) ? add_term(c, w, 0, n) : 0;
    }
    c->out.n = 0;
    c->pieces.n = 0;
    if (n <= MAX_WHOLE && span_push(&c->out, 0, n) < 0) return -1;
    if (span_push(&c->pieces, 0, n) < 0) return -1;
    if (has_slash && split_each(c, w, slash_at) < 0) return -1;
    if (has_dot && split_each(c, w, dot_at) < 0) return -1;
    if (has_underscore && split_each(c, w, underscore_at) < 0) return -1;
    if (upper && lower) {
        for (Py_ssize_t p = 0; p < c->pieces.n; p++) {
            Py_ssize_t start = c->pieces.v[p].start, end = c->pieces.v[p].end;
            int piece_upper, piece_lower;
            case_of(w, start, end, &piece_upper, &piece_lower);
            if (!(piece_upper && piece_lower)) continue;
            Py_ssize_t first = c->out.n;
            if (case_humps(w, start, end, &c->out) < 0) return -1;
            if (c->out.n - first < 2) c->out.n = first; /* one hump: no split */
        }
    }
    for (Py_ssize_t t = 0; t < c->out.n; t++) {
        if (add_term(c, w, c->out.v[t].start, c->out.v[t].end) < 0) return -1;
    }
    return 0;
}

/* ---- words and their terms ---------------------------------------------------------- */

/* `word` as UTF-8 (lone surrogates passed through), a new reference to bytes. */
static PyObject *utf8_of(PyObject *word) {
    if (!PyUnicode_Check(word)) {
        PyErr_SetString(PyExc_TypeError, "words and terms must be str");
        return NULL;
    }
    return PyUnicode_AsEncodedString(word, "utf-8", "surrogatepass");
}

/* The id of a word; a new word's terms are appended to term_of_word. `word` is the str when
 * the word is not ASCII (then `expand` gives its terms), else NULL. */
static Py_ssize_t word_id(Counter *c, const char *s, Py_ssize_t n, PyObject *word, PyObject *expand) {
    int added;
    Py_ssize_t id = table_id(&c->words, s, n, &added);
    if (id < 0 || !added) return id;
    if (word == NULL) {
        if (expand_ascii(c, s, n) < 0) return -1;
    } else {
        PyObject *terms = PyObject_CallOneArg(expand, word);
        if (terms == NULL) return -1;
        PyObject *seq = PySequence_Fast(terms, "expand must return a sequence of str");
        Py_DECREF(terms);
        if (seq == NULL) return -1;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *bytes = utf8_of(PySequence_Fast_GET_ITEM(seq, i));
            if (bytes == NULL) {
                Py_DECREF(seq);
                return -1;
            }
            int term_added;
            Py_ssize_t term = table_id(&c->terms, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes), &term_added);
            Py_DECREF(bytes);
            if (term < 0 || i32_push(&c->term_of_word, (int32_t)term) < 0) {
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
    }
    if (i64_push(&c->word_first, (int64_t)c->term_of_word.n) < 0) return -1;
    return id;
}

/* Per-unit tallies: a dense count per term id, and the ids touched. */
typedef struct {
    int32_t *count;
    Py_ssize_t cap;
    I32Vec touched;
} Tally;

static inline int tally_word(Tally *t, Counter *c, Py_ssize_t word) {
    if (c->terms.count > t->cap) {
        Py_ssize_t old = t->cap;
        if (grow((void **)&t->count, &t->cap, c->terms.count, sizeof(int32_t)) < 0) return -1;
        memset(t->count + old, 0, sizeof(int32_t) * (size_t)(t->cap - old)); /* new entries: 0 */
    }
    int64_t lo = c->word_first.v[word], hi = c->word_first.v[word + 1];
    for (int64_t k = lo; k < hi; k++) {
        int32_t term = c->term_of_word.v[k];
        if (t->count[term]++ == 0 && i32_push(&t->touched, term) < 0) return -1;
    }
    return 0;
}

static int scan_ascii(Counter *c, Tally *tally, const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (!is_word(s[i])) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        while (i < n && is_word(s[i])) i++;
        for (;;) { /* (?:(?:::|[./\-])[A-Za-z0-9_]+)* */
            if (i + 1 < n && (s[i] == '.' || s[i] == '/' || s[i] == '-') && is_word(s[i + 1])) {
                i += 1;
            } else if (i + 2 < n && s[i] == ':' && s[i + 1] == ':' && is_word(s[i + 2])) {
                i += 2;
            } else {
                break;
            }
            while (i < n && is_word(s[i])) i++;
        }
        Py_ssize_t word = word_id(c, s + start, i - start, NULL, NULL);
        if (word < 0 || tally_word(tally, c, word) < 0) return -1;
    }
    return 0;
}

static int count_word_list(Counter *c, Tally *tally, PyObject *words, PyObject *expand) {
    PyObject *seq = PySequence_Fast(words, "words_of must return a sequence of str");
    if (seq == NULL) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *word = PySequence_Fast_GET_ITEM(seq, k);
        Py_ssize_t id;
        if (PyUnicode_Check(word) && PyUnicode_IS_ASCII(word)) {
            id = word_id(c, (const char *)PyUnicode_DATA(word), PyUnicode_GET_LENGTH(word), NULL, NULL);
        } else {
            PyObject *bytes = utf8_of(word);
            if (bytes == NULL) {
                Py_DECREF(seq);
                return -1;
            }
            id = word_id(c, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes), word, expand);
            Py_DECREF(bytes);
        }
        if (id < 0 || tally_word(tally, c, id) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int compare_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static PyObject *bytearray_of(const void *data, Py_ssize_t size) {
    return PyByteArray_FromStringAndSize(size ? (const char *)data : NULL, size);
}

static PyObject *count_terms(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *units, *words_of, *expand;
    if (!PyArg_ParseTuple(args, "OOO:count_terms", &units, &words_of, &expand)) return NULL;
    PyObject *unit_seq = PySequence_Fast(units, "units must be a sequence");
    if (unit_seq == NULL) return NULL;

    PyObject *result = NULL;
    Counter c;
    memset(&c, 0, sizeof(c));
    Tally tally;
    memset(&tally, 0, sizeof(tally));
    I64Vec bounds = {0}, lengths = {0};
    I32Vec term_ids = {0}, tfs = {0};
    if (table_init(&c.words) < 0) goto done;
    if (table_init(&c.terms) < 0) goto done;
    if (i64_push(&c.word_first, 0) < 0 || i64_push(&bounds, 0) < 0) goto done;

    Py_ssize_t n_units = PySequence_Fast_GET_SIZE(unit_seq);
    for (Py_ssize_t u = 0; u < n_units; u++) {
        PyObject *texts = PySequence_Fast(PySequence_Fast_GET_ITEM(unit_seq, u), "a unit must be a sequence of str");
        if (texts == NULL) goto done;
        Py_ssize_t n_texts = PySequence_Fast_GET_SIZE(texts);
        for (Py_ssize_t k = 0; k < n_texts; k++) {
            PyObject *text = PySequence_Fast_GET_ITEM(texts, k);
            int failed;
            if (!PyUnicode_Check(text)) {
                PyErr_SetString(PyExc_TypeError, "a unit must be a sequence of str");
                failed = 1;
            } else if (PyUnicode_IS_ASCII(text)) {
                failed = scan_ascii(&c, &tally, (const char *)PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)) < 0;
            } else {
                PyObject *words = PyObject_CallOneArg(words_of, text);
                failed = words == NULL || count_word_list(&c, &tally, words, expand) < 0;
                Py_XDECREF(words);
            }
            if (failed) {
                Py_DECREF(texts);
                goto done;
            }
        }
        Py_DECREF(texts);
        /* the unit's terms, ascending, with their counts; the tally cleared for the next */
        if (tally.touched.n > 1) qsort(tally.touched.v, (size_t)tally.touched.n, sizeof(int32_t), compare_int32);
        int64_t total = 0;
        for (Py_ssize_t k = 0; k < tally.touched.n; k++) {
            int32_t term = tally.touched.v[k];
            int32_t tf = tally.count[term];
            tally.count[term] = 0;
            total += tf;
            if (i32_push(&term_ids, term) < 0 || i32_push(&tfs, tf) < 0) goto done;
        }
        tally.touched.n = 0;
        if (i64_push(&bounds, (int64_t)term_ids.n) < 0 || i64_push(&lengths, total) < 0) goto done;
    }

    PyObject *terms = PyList_New(c.terms.count);
    if (terms == NULL) goto done;
    for (Py_ssize_t id = 0; id < c.terms.count; id++) {
        PyObject *term = PyUnicode_DecodeUTF8(c.terms.arena + c.terms.offsets[id], c.terms.lengths[id], "surrogatepass");
        if (term == NULL) {
            Py_DECREF(terms);
            goto done;
        }
        PyList_SET_ITEM(terms, id, term);
    }
    result = Py_BuildValue(
        "(NNNNN)", terms, bytearray_of(bounds.v, bounds.n * (Py_ssize_t)sizeof(int64_t)),
        bytearray_of(term_ids.v, term_ids.n * (Py_ssize_t)sizeof(int32_t)),
        bytearray_of(tfs.v, tfs.n * (Py_ssize_t)sizeof(int32_t)),
        bytearray_of(lengths.v, lengths.n * (Py_ssize_t)sizeof(int64_t)));

done:
    Py_DECREF(unit_seq);
    table_free(&c.words);
    table_free(&c.terms);
    PyMem_Free(c.word_first.v);
    PyMem_Free(c.term_of_word.v);
    PyMem_Free(c.out.v);
    PyMem_Free(c.pieces.v);
    PyMem_Free(c.finer.v);
    PyMem_Free(c.lowered);
    PyMem_Free(tally.count);
    PyMem_Free(tally.touched.v);
    PyMem_Free(bounds.v);
    PyMem_Free(lengths.v);
    PyMem_Free(term_ids.v);
    PyMem_Free(tfs.v);
    return result;
}

/* ---- packing postings (postings.PackedPostings.from_counts) ------------------------- */

/* A C-contiguous buffer of `itemsize`-byte items (numpy arrays of the right dtype). */
static int items_of(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize || view->len % itemsize != 0) {
        PyErr_Format(PyExc_TypeError, "%s must hold %zd-byte integers", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject *terms; /* borrowed */
    Py_buffer term_ids, bounds, tfs;
    int held;
    int32_t *global; /* local term id -> global (shared with the other documents of its list) */
} Document;

static const Table *sort_table;

static int compare_terms(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const Table *t = sort_table;
    Py_ssize_t nx = t->lengths[x], ny = t->lengths[y];
    int c = memcmp(t->arena + t->offsets[x], t->arena + t->offsets[y], (size_t)(nx < ny ? nx : ny));
    if (c != 0) return c;
    return (nx > ny) - (nx < ny);
}

/* pack_postings([(terms, term_ids, bounds, tfs), ...]) -> (terms, offsets, tfs, bounds):
 * documents' counted terms (their chunks numbered on from 0, one document after another) as
 * one posting per term, terms in code point order (UTF-8 byte order is the same), chunk
 * offsets ascending as uint32 LE, tfs capped at 65535 as uint16 LE; only terms that occur. */
static PyObject *pack_postings(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *documents;
    if (!PyArg_ParseTuple(args, "O:pack_postings", &documents)) return NULL;
    PyObject *seq = PySequence_Fast(documents, "documents must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n_docs = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    Document *docs = PyMem_Calloc((size_t)(n_docs ? n_docs : 1), sizeof(Document));
    Table table;
    int table_ready = 0;
    PyObject **term_objects = NULL; /* global id -> str (borrowed) */
    Py_ssize_t term_objects_cap = 0;
    int64_t *per_term = NULL;  /* postings per global id, then each one's next slot */
    int32_t *present = NULL;   /* global ids that occur, sorted */
    unsigned char *offsets = NULL, *tf_bytes = NULL;
    PyObject *terms_out = NULL, *bounds_out = NULL;
    if (docs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (table_init(&table) < 0) goto done;
    table_ready = 1;
    int64_t total = 0;
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        Document *doc = &docs[d];
        PyObject *item = PySequence_Fast_GET_ITEM(seq, d);
        PyObject *ids_obj, *bounds_obj, *tfs_obj;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "O!OOO", &PyList_Type, &doc->terms, &ids_obj, &bounds_obj, &tfs_obj)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a document is (terms, term_ids, bounds, tfs)");
            goto done;
        }
        if (items_of(ids_obj, &doc->term_ids, 4, "term_ids") < 0) goto done;
        if (items_of(bounds_obj, &doc->bounds, 8, "bounds") < 0) {
            PyBuffer_Release(&doc->term_ids);
            goto done;
        }
        if (items_of(tfs_obj, &doc->tfs, 4, "tfs") < 0) {
            PyBuffer_Release(&doc->term_ids);
            PyBuffer_Release(&doc->bounds);
            goto done;
        }
        doc->held = 1;
        if (doc->term_ids.len != doc->tfs.len || doc->bounds.len < 8) {
            PyErr_SetString(PyExc_ValueError, "term_ids and tfs differ in length, or bounds is empty");
            goto done;
        }
        total += doc->term_ids.len / 4;
        /* the global ids of this document's list of terms: shared with an earlier document's */
        for (Py_ssize_t e = 0; e < d; e++) {
            if (docs[e].terms == doc->terms) {
                doc->global = docs[e].global;
                break;
            }
        }
        if (doc->global != NULL) continue;
        Py_ssize_t n_terms = PyList_GET_SIZE(doc->terms);
        doc->global = PyMem_Malloc(sizeof(int32_t) * (size_t)(n_terms ? n_terms : 1));
        if (doc->global == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n_terms; k++) {
            PyObject *term = PyList_GET_ITEM(doc->terms, k);
            PyObject *bytes = NULL;
            const char *data;
            Py_ssize_t size;
            if (PyUnicode_Check(term) && PyUnicode_IS_ASCII(term)) {
                data = (const char *)PyUnicode_DATA(term);
                size = PyUnicode_GET_LENGTH(term);
            } else {
                bytes = utf8_of(term);
                if (bytes == NULL) goto done;
                data = PyBytes_AS_STRING(bytes);
                size = PyBytes_GET_SIZE(bytes);
            }
            int added;
            Py_ssize_t id = table_id(&table, data, size, &added);
            Py_XDECREF(bytes);
            if (id < 0) goto done;
            if (added) {
                if (grow((void **)&term_objects, &term_objects_cap, id + 1, sizeof(PyObject *)) < 0) goto done;
                term_objects[id] = term;
            }
            doc->global[k] = (int32_t)id;
        }
    }
    /* (a document's own list, owned by the first document that has it, is freed below) */
    if (total > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many postings in one segment");
        goto done;
    }
    Py_ssize_t n_global = table.count;
    per_term = PyMem_Calloc((size_t)(n_global ? n_global : 1), sizeof(int64_t));
    present = PyMem_Malloc(sizeof(int32_t) * (size_t)(n_global ? n_global : 1));
    offsets = PyMem_Malloc((size_t)(total ? total : 1) * 4);
    tf_bytes = PyMem_Malloc((size_t)(total ? total : 1) * 2);
    if (per_term == NULL || present == NULL || offsets == NULL || tf_bytes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* count each term's postings (checking every id and bound), then order the terms */
    int64_t chunk_base = 0;
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        Document *doc = &docs[d];
        const int32_t *ids = doc->term_ids.buf;
        const int64_t *bounds = doc->bounds.buf;
        Py_ssize_t n_ids = doc->term_ids.len / 4, n_units = doc->bounds.len / 8 - 1;
        Py_ssize_t n_local = PyList_GET_SIZE(doc->terms);
        if (bounds[0] != 0 || bounds[n_units] != n_ids) goto bad_bounds;
        for (Py_ssize_t u = 0; u < n_units; u++) {
            if (bounds[u + 1] < bounds[u]) goto bad_bounds;
        }
        for (Py_ssize_t k = 0; k < n_ids; k++) {
            if (ids[k] < 0 || ids[k] >= n_local) {
                PyErr_SetString(PyExc_ValueError, "a term id outside its list of terms");
                goto done;
            }
            per_term[doc->global[ids[k]]]++;
        }
        chunk_base += n_units;
    }
    if (chunk_base > (int64_t)UINT32_MAX + 1) {
        PyErr_SetString(PyExc_OverflowError, "too many chunks in one segment");
        goto done;
    }
    Py_ssize_t n_present = 0;
    for (Py_ssize_t g = 0; g < n_global; g++) {
        if (per_term[g]) present[n_present++] = (int32_t)g;
    }
    sort_table = &table; /* qsort has no context argument; the GIL is held throughout */
    qsort(present, (size_t)n_present, sizeof(int32_t), compare_terms);
    terms_out = PyList_New(n_present);
    bounds_out = PyList_New(n_present + 1);
    if (terms_out == NULL || bounds_out == NULL) goto done;
    int64_t next = 0;
    for (Py_ssize_t r = 0; r < n_present; r++) {
        int32_t g = present[r];
        PyObject *start = PyLong_FromLongLong(next);
        if (start == NULL) goto done;
        PyList_SET_ITEM(bounds_out, r, start);
        Py_INCREF(term_objects[g]);
        PyList_SET_ITEM(terms_out, r, term_objects[g]);
        int64_t count = per_term[g];
        per_term[g] = next; /* from here: where its next posting goes */
        next += count;
    }
    PyObject *end = PyLong_FromLongLong(next);
    if (end == NULL) goto done;
    PyList_SET_ITEM(bounds_out, n_present, end);
    /* place the postings: chunks are visited in ascending order, so each term's are too */
    chunk_base = 0;
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        Document *doc = &docs[d];
        const int32_t *ids = doc->term_ids.buf, *tfs = doc->tfs.buf;
        const int64_t *bounds = doc->bounds.buf;
        Py_ssize_t n_units = doc->bounds.len / 8 - 1;
        for (Py_ssize_t u = 0; u < n_units; u++) {
            uint32_t chunk = (uint32_t)(chunk_base + u);
            for (int64_t k = bounds[u]; k < bounds[u + 1]; k++) {
                int64_t at = per_term[doc->global[ids[k]]]++;
                int32_t tf = tfs[k] < 0 ? 0 : (tfs[k] > 65535 ? 65535 : tfs[k]);
                unsigned char *o = offsets + 4 * at, *t = tf_bytes + 2 * at;
                o[0] = (unsigned char)chunk;
                o[1] = (unsigned char)(chunk >> 8);
                o[2] = (unsigned char)(chunk >> 16);
                o[3] = (unsigned char)(chunk >> 24);
                t[0] = (unsigned char)tf;
                t[1] = (unsigned char)(tf >> 8);
            }
        }
        chunk_base += n_units;
    }
    result = Py_BuildValue("(ONNO)", terms_out, bytearray_of(offsets, total * 4), bytearray_of(tf_bytes, total * 2), bounds_out);
    goto done;

bad_bounds:
    PyErr_SetString(PyExc_ValueError, "bounds must rise from 0 to the number of term ids");
done:
    for (Py_ssize_t d = 0; d < n_docs && docs != NULL; d++) {
        Document *doc = &docs[d];
        if (doc->held) {
            PyBuffer_Release(&doc->term_ids);
            PyBuffer_Release(&doc->bounds);
            PyBuffer_Release(&doc->tfs);
        }
        int owner = doc->global != NULL;
        for (Py_ssize_t e = 0; e < d && owner; e++) owner = docs[e].global != doc->global;
        if (owner) PyMem_Free(doc->global);
    }
    PyMem_Free(docs);
    if (table_ready) table_free(&table);
    PyMem_Free(term_objects);
    PyMem_Free(per_term);
    PyMem_Free(present);
    PyMem_Free(offsets);
    PyMem_Free(tf_bytes);
    Py_XDECREF(terms_out);
    Py_XDECREF(bounds_out);
    Py_DECREF(seq);
    return result;
}

/* posting_values(segment_id, terms, offsets, tfs, bounds, lo, hi) -> [segment_id, term,
 * offsets slice, tfs slice, ...] for postings lo to hi of a packed segment: the flattened
 * values of one multi-row INSERT (postings.PackedPostings.value_batches), the slices as
 * bytearray (sqlite3 binds them without its adapter lookup). */
static PyObject *posting_values(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *segment, *terms, *offsets, *tfs, *bounds;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!nn:posting_values", &segment, &PyList_Type, &terms, &PyByteArray_Type, &offsets,
                          &PyByteArray_Type, &tfs, &PyList_Type, &bounds, &lo, &hi)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(terms);
    if (lo < 0 || hi < lo || hi > n || PyList_GET_SIZE(bounds) != n + 1) {
        PyErr_SetString(PyExc_ValueError, "postings lo..hi outside the segment, or bounds not one longer than terms");
        return NULL;
    }
    PyObject *values = PyList_New(4 * (hi - lo));
    if (values == NULL) return NULL;
    const char *offset_bytes = PyByteArray_AS_STRING(offsets), *tf_bytes = PyByteArray_AS_STRING(tfs);
    Py_ssize_t offsets_len = PyByteArray_GET_SIZE(offsets), tfs_len = PyByteArray_GET_SIZE(tfs);
    Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, lo));
    for (Py_ssize_t k = lo; k < hi; k++) {
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, k + 1));
        if ((start == -1 || end == -1) && PyErr_Occurred()) goto fail;
        if (start < 0 || end < start || 4 * end > offsets_len || 2 * end > tfs_len) {
            PyErr_SetString(PyExc_ValueError, "bounds outside the packed postings");
            goto fail;
        }
        PyObject *chunk_ids = PyByteArray_FromStringAndSize(offset_bytes + 4 * start, 4 * (end - start));
        if (chunk_ids == NULL) goto fail;
        PyObject *term_tfs = PyByteArray_FromStringAndSize(tf_bytes + 2 * start, 2 * (end - start));
        if (term_tfs == NULL) {
            Py_DECREF(chunk_ids);
            goto fail;
        }
        Py_ssize_t at = 4 * (k - lo);
        Py_INCREF(segment);
        PyList_SET_ITEM(values, at, segment);
        PyObject *term = PyList_GET_ITEM(terms, k);
        Py_INCREF(term);
        PyList_SET_ITEM(values, at + 1, term);
        PyList_SET_ITEM(values, at + 2, chunk_ids);
        PyList_SET_ITEM(values, at + 3, term_tfs);
        start = end;
    }
    return values;
fail:
    Py_DECREF(values); /* items not set yet are NULL, which list deallocation skips */
    return NULL;
}

static PyMethodDef methods[] = {
    {"count_terms", count_terms, METH_VARARGS,
     "count_terms(units, words_of, expand) -> (terms, bounds, term_ids, tfs, lengths)"},
    {"pack_postings", pack_postings, METH_VARARGS,
     "pack_postings([(terms, term_ids, bounds, tfs), ...]) -> (terms, offsets, tfs, bounds)"},
    {"posting_values", posting_values, METH_VARARGS,
     "posting_values(segment_id, terms, offsets, tfs, bounds, lo, hi) -> flattened row values"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_compiled", "The indexer's term counting and postings packing, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__compiled(void) { return PyModule_Create(&module); }
