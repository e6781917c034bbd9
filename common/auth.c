/* Datagram MAC with OpenSSL's libcrypto (construction in auth.h).
 *
 * GCM's nonce is 12 bytes, too short to hold sender, session and stamp,
 * so each (sender, session) gets its own key, derived from the layout key
 * with HKDF, and the nonce is the stamp alone.  A key lives in a slot of a
 * small direct-mapped cache as an EVP_CIPHER_CTX keyed once: libcrypto
 * expands the AES key and computes GHASH's key then, and a datagram only
 * sets the nonce, feeds the datagram as associated data and reads the tag.
 * Derivation happens once per peer session.  Tags are compared with
 * CRYPTO_memcmp (constant time) and keys wiped with OPENSSL_cleanse. */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm_error.h"
#include "wire.h"

#define LM_AUTH_SECRET_MIN 16
#define LM_AUTH_SECRET_MAX 4096
#define LM_AUTH_CACHE_SLOTS 64 /* power of two */
#define LM_AUTH_NONCE_BYTES 12
#define LM_AUTH_KEY_SALT "lemuria layout key v2"
#define LM_AUTH_SALT_LEN (sizeof(LM_AUTH_KEY_SALT) - 1) /* no NUL */
#define LM_AUTH_KEY_INFO "lemuria datagram mac v2"
#define LM_AUTH_INFO_LEN (sizeof(LM_AUTH_KEY_INFO) - 1)

struct lm_auth_slot {
	uint16_t sender;
	uint64_t session;
	int used;
	EVP_CIPHER_CTX *gcm; /* keyed with the slot's key; NULL until needed */
};

struct lm_auth {
	uint8_t master[LM_KEY_BYTES];
	EVP_CIPHER *aes_gcm; /* fetched once, not per key */
	EVP_KDF *hkdf;
	pthread_mutex_t lock;
	struct lm_auth_slot slots[LM_AUTH_CACHE_SLOTS];
};

int lm_auth_init_library(void)
{
	return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL) == 1 ? 0
								       : LM_EIO;
}

lm_auth *lm_auth_create(const uint8_t key[LM_KEY_BYTES])
{
	lm_auth *auth;

	if (lm_auth_init_library() != 0 || !(auth = calloc(1, sizeof(*auth))))
		return NULL;
	auth->aes_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	auth->hkdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!auth->aes_gcm || !auth->hkdf) {
		EVP_CIPHER_free(auth->aes_gcm);
		EVP_KDF_free(auth->hkdf);
		free(auth);
		return NULL;
	}
	memcpy(auth->master, key, sizeof(auth->master));
	pthread_mutex_init(&auth->lock, NULL);
	return auth;
}

void lm_auth_destroy(lm_auth *auth)
{
	if (!auth)
		return;
	pthread_mutex_destroy(&auth->lock);
	for (int i = 0; i < LM_AUTH_CACHE_SLOTS; i++)
		EVP_CIPHER_CTX_free(auth->slots[i].gcm); /* cleanses the key */
	EVP_CIPHER_free(auth->aes_gcm);
	EVP_KDF_free(auth->hkdf);
	OPENSSL_cleanse(auth->master, sizeof(auth->master));
	free(auth);
}

/* One HKDF-SHA256 step into out[0..outlen): mode
 * EVP_KDF_HKDF_MODE_EXTRACT_ONLY takes key as the input keying material
 * and `extra` as the salt, EVP_KDF_HKDF_MODE_EXPAND_ONLY key as the
 * pseudorandom key and `extra` as the info.  0, or -1 when libcrypto
 * fails. */
static int lm_auth_hkdf(EVP_KDF *hkdf, int mode, const uint8_t *key,
			size_t keylen, const void *extra, size_t extralen,
			uint8_t *out, size_t outlen)
{
	EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(hkdf);
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 (char *)"SHA256", 0),
		OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						  (void *)key, keylen),
		OSSL_PARAM_construct_octet_string(
			mode == EVP_KDF_HKDF_MODE_EXTRACT_ONLY
				? OSSL_KDF_PARAM_SALT
				: OSSL_KDF_PARAM_INFO,
			(void *)extra, extralen),
		OSSL_PARAM_END
	};
	int ok;

	if (!ctx)
		return -1;
	ok = EVP_KDF_derive(ctx, out, outlen, params) == 1;
	EVP_KDF_CTX_free(ctx);
	return ok ? 0 : -1;
}

int lm_auth_key_from_file(const char *path, uint8_t key[LM_KEY_BYTES],
			  char *err, size_t errlen)
{
	uint8_t secret[LM_AUTH_SECRET_MAX + 1];
	EVP_KDF *hkdf;
	size_t got = 0;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "secret file \"%s\": %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	while (got < sizeof(secret) &&
	       (n = read(fd, secret + got, sizeof(secret) - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "secret file \"%s\": %s", path,
				 strerror(errno));
			close(fd);
			OPENSSL_cleanse(secret, got);
			return LM_EIO;
		}
		got += (size_t)n;
	}
	close(fd);
	if (got < LM_AUTH_SECRET_MIN || got > LM_AUTH_SECRET_MAX) {
		snprintf(err, errlen,
			 "secret file \"%s\" holds %zu bytes; it needs %d to %d",
			 path, got, LM_AUTH_SECRET_MIN, LM_AUTH_SECRET_MAX);
		OPENSSL_cleanse(secret, got);
		return LM_EINVAL;
	}
	hkdf = lm_auth_init_library() == 0 ? EVP_KDF_fetch(NULL, "HKDF", NULL)
					   : NULL;
	rc = hkdf ? lm_auth_hkdf(hkdf, EVP_KDF_HKDF_MODE_EXTRACT_ONLY, secret,
				 got, LM_AUTH_KEY_SALT, LM_AUTH_SALT_LEN, key,
				 LM_KEY_BYTES)
		  : -1;
	EVP_KDF_free(hkdf);
	OPENSSL_cleanse(secret, got);
	if (rc) {
		snprintf(err, errlen,
			 "secret file \"%s\": libcrypto's HKDF-SHA256 failed",
			 path);
		return LM_EIO;
	}
	return 0;
}

/* Finds the slot of (sender, session), deriving its key and keying its
 * context when the slot held another; NULL when libcrypto fails.  Caller
 * holds the lock. */
static struct lm_auth_slot *lm_auth_slot_locked(struct lm_auth *auth,
						uint16_t sender,
						uint64_t session)
{
	uint64_t mix = session * 0x9e3779b97f4a7c15ull ^ sender;
	struct lm_auth_slot *s =
		&auth->slots[(mix >> 58) & (LM_AUTH_CACHE_SLOTS - 1)];
	uint8_t info[LM_AUTH_INFO_LEN + 2 + 8];
	const EVP_CIPHER *cipher;
	uint8_t key[32];
	int ok;

	if (s->used && s->sender == sender && s->session == session)
		return s;
	s->used = 0;
	if (!s->gcm && !(s->gcm = EVP_CIPHER_CTX_new()))
		return NULL;
	memcpy(info, LM_AUTH_KEY_INFO, LM_AUTH_INFO_LEN);
	lm_put16(info + LM_AUTH_INFO_LEN, sender);
	lm_put64(info + LM_AUTH_INFO_LEN + 2, session);
	/* a context keyed before keeps libcrypto's state and takes the new
	 * key alone */
	cipher = EVP_CIPHER_CTX_get0_cipher(s->gcm) ? NULL : auth->aes_gcm;
	ok = lm_auth_hkdf(auth->hkdf, EVP_KDF_HKDF_MODE_EXPAND_ONLY,
			  auth->master, sizeof(auth->master), info,
			  sizeof(info), key, sizeof(key)) == 0 &&
	     EVP_EncryptInit_ex2(s->gcm, cipher, key, NULL, NULL) == 1;
	OPENSSL_cleanse(key, sizeof(key));
	if (!ok)
		return NULL;
	s->sender = sender;
	s->session = session;
	s->used = 1;
	return s;
}

/* The GMAC of dg[0..len) under the slot's key into tag: only the nonce is
 * set anew.  0, or -1 when libcrypto fails. */
static int lm_auth_tag(EVP_CIPHER_CTX *gcm, const uint8_t *nonce,
		       const uint8_t *dg, size_t len, uint8_t *tag)
{
	OSSL_PARAM get[2] = {
		OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG,
						  tag, LM_WIRE_MAC_SIZE),
		OSSL_PARAM_END
	};
	uint8_t none[1]; /* GCM's final step writes no ciphertext */
	int outl;

	if (EVP_EncryptInit_ex2(gcm, NULL, NULL, nonce, NULL) != 1 ||
	    EVP_EncryptUpdate(gcm, NULL, &outl, dg, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(gcm, none, &outl) != 1 ||
	    EVP_CIPHER_CTX_get_params(gcm, get) != 1)
		return -1;
	return 0;
}

/* The MAC of dg[0..len) (at most LM_WIRE_MAX_DATAGRAM bytes) into tag.
 * 0, or -1 when libcrypto fails. */
static int lm_auth_run(const lm_auth *cauth, const uint8_t *dg, size_t len,
		       uint8_t *tag)
{
	struct lm_auth *auth = (struct lm_auth *)cauth;
	uint8_t nonce[LM_AUTH_NONCE_BYTES] = { 0 };
	struct lm_auth_slot *s;
	int rc = -1;

	memcpy(nonce, dg + 28, 8); /* the stamp (wire.h) */
	pthread_mutex_lock(&auth->lock);
	s = lm_auth_slot_locked(auth, lm_get16(dg + 6), lm_get64(dg + 12));
	if (s && lm_auth_tag(s->gcm, nonce, dg, len, tag) == 0)
		rc = 0;
	else if (s)
		s->used = 0; /* key the context afresh next time */
	pthread_mutex_unlock(&auth->lock);
	return rc;
}

void lm_auth_sign(const lm_auth *auth, uint8_t *dg, size_t len)
{
	if (lm_auth_run(auth, dg, len, dg + len))
		memset(dg + len, 0, LM_WIRE_MAC_SIZE);
}

int lm_auth_verify(const lm_auth *auth, const uint8_t *dg, size_t len)
{
	uint8_t tag[LM_WIRE_MAC_SIZE];
	size_t body;

	if (len < LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE)
		return LM_EAUTH;
	body = len - LM_WIRE_MAC_SIZE;
	if (lm_auth_run(auth, dg, body, tag) ||
	    CRYPTO_memcmp(tag, dg + body, LM_WIRE_MAC_SIZE) != 0)
		return LM_EAUTH;
	return 0;
}

int lm_auth_gmac(const uint8_t key[32], const uint8_t nonce[12],
		 const uint8_t *data, size_t len, uint8_t tag[16])
{
	EVP_CIPHER *aes_gcm = lm_auth_init_library() == 0
				      ? EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL)
				      : NULL;
	EVP_CIPHER_CTX *gcm = EVP_CIPHER_CTX_new();
	int ok = aes_gcm && gcm &&
		 EVP_EncryptInit_ex2(gcm, aes_gcm, key, NULL, NULL) == 1 &&
		 lm_auth_tag(gcm, nonce, data, len, tag) == 0;

	EVP_CIPHER_CTX_free(gcm);
	EVP_CIPHER_free(aes_gcm);
	return ok ? 0 : LM_ENOMEM;
}

const char *lm_auth_construction(const lm_auth *auth)
{
	(void)auth;
	return "AES-256-GCM (GMAC), OpenSSL libcrypto";
}
