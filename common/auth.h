/* Datagram authentication with a per-layout secret.
 *
 * The MAC is GMAC: the AES-256-GCM tag (NIST SP 800-38D) of an empty
 * plaintext with the whole datagram as associated data, computed by
 * OpenSSL's libcrypto on every host, so every CPU gives the same tag.
 * Keys (RFC 5869 HKDF with SHA-256, docs/protocol.md):
 *
 *   layout key  = HKDF-Extract(salt = "lemuria layout key v2",
 *                              IKM = the secret file's contents)
 *   sender key  = HKDF-Expand(PRK = layout key,
 *                             info = "lemuria datagram mac v2"
 *                                    || sender id (u16 LE)
 *                                    || sender session (u64 LE),
 *                             L = 32)
 *   nonce       = the datagram's stamp (u64 LE) || 4 zero bytes
 *   MAC         = AES-256-GCM(sender key, nonce, plaintext = "",
 *                             AAD = header and payload).tag
 *
 * The labels are ASCII without a terminator.  Each sender incarnation
 * has its own key, so the stamp, which never repeats within a session,
 * is a unique nonce.  Safe to share between threads. */
#ifndef LM_AUTH_H
#define LM_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct lm_auth lm_auth;

/* Initialises libcrypto without the teardown it would otherwise register
 * with atexit() on first use.  Exit handlers run last-registered first,
 * so that teardown would come before every handler registered earlier,
 * such as liblemuria's, which still signs rank 0's LEAVE (client.c), and
 * while threads that verify datagrams still run.  The other functions
 * here call it; a library that registers an exit handler calls it first.
 * Returns 0, or LM_EIO when libcrypto cannot start. */
int lm_auth_init_library(void);

/* Copies the key.  NULL on allocation failure or when libcrypto lacks
 * AES-256-GCM or HKDF. */
lm_auth *lm_auth_create(const uint8_t key[LM_KEY_BYTES]);
void lm_auth_destroy(lm_auth *auth);

/* Derives the 32-byte layout key from the contents of a secret file (at
 * least 16 bytes; HKDF-Extract above).  Returns 0, or LM_EIO / LM_EINVAL
 * with a message naming the file in err. */
int lm_auth_key_from_file(const char *path, uint8_t key[LM_KEY_BYTES],
			  char *err, size_t errlen);

/* dg holds an encoded datagram of `len` bytes (header with LM_DGF_MAC set,
 * then payload) and has room for LM_WIRE_MAC_SIZE more; the MAC is written
 * at dg + len.  Should libcrypto fail (out of memory), the MAC written is
 * zeros, which no receiver accepts: the datagram is lost and sent again
 * like any lost datagram. */
void lm_auth_sign(const lm_auth *auth, uint8_t *dg, size_t len);

/* dg is a whole received datagram of `len` bytes ending in the MAC.
 * Returns 0 when authentic, LM_EAUTH otherwise (including len too short,
 * and a libcrypto failure). */
int lm_auth_verify(const lm_auth *auth, const uint8_t *dg, size_t len);

/* The GMAC alone: the AES-256-GCM tag of data[0..len) as associated data
 * with an empty plaintext, by the code that computes the datagrams' MACs;
 * for known-answer tests.  0, or LM_ENOMEM when libcrypto fails. */
int lm_auth_gmac(const uint8_t key[32], const uint8_t nonce[12],
		 const uint8_t *data, size_t len, uint8_t tag[16]);

/* Names the construction in use, for logs and benchmarks. */
const char *lm_auth_construction(const lm_auth *auth);

#endif
