/*
 * wpbench_issues.so: a PHP extension that records the runner's warnings, notices and deprecations
 * where candidate code cannot reach them.
 *
 * A PHP error handler is userland state: candidate code can replace it (set_error_handler), return
 * true from its own handler so the runner's never sees an error, or bind a closure to the handler's
 * class and rewrite what it collected. This extension registers a Zend error observer instead, which
 * the engine notifies of every error *before* any user handler runs, and keeps the records in C
 * memory. Only errors that are reported at the time (error_reporting() & type: `@` silences, as it
 * does PHP's own display) and not fatal (those end the process; the runner's shutdown hook reports
 * them) are kept, the first MAX of them; all are counted.
 *
 * PHP sees one function, wpbench_issues_take(string $key): array|false. The first call fixes the key
 * (the runner passes its nonce, which candidate code never learns); every call with that key returns
 * {issues: list<{level, message, file, line}>, total: int} and forgets the returned records. Any other
 * key gets false and takes nothing, so candidate code can neither read nor drain the records.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "php.h"
#include "zend_observer.h"

#define MAX_ISSUES 200
#define MAX_MESSAGE 2000

static zval pending;          /* a PHP array, created on first use in each request */
static zend_long total = 0;   /* every recorded error, including those past MAX_ISSUES */
static zend_long kept = 0;    /* records in pending since the start (the cap counts these) */
static zend_string *key = NULL;

static const char *level_of(int type)
{
	switch (type) {
	case E_WARNING: case E_USER_WARNING: case E_CORE_WARNING: case E_COMPILE_WARNING: return "Warning";
	case E_NOTICE: case E_USER_NOTICE: return "Notice";
	case E_DEPRECATED: case E_USER_DEPRECATED: return "Deprecated";
	default: return "Unknown error";
	}
}

static void observe(int type, zend_string *file, uint32_t line, zend_string *message)
{
	const int fatal = E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR | E_USER_ERROR | E_RECOVERABLE_ERROR;
	if ((type & fatal) || !(EG(error_reporting) & type)) {
		return;
	}
	++total;
	if (kept >= MAX_ISSUES) {
		return;
	}
	++kept;
	if (Z_TYPE(pending) != IS_ARRAY) {
		array_init(&pending);
	}
	zval row;
	array_init(&row);
	add_assoc_string(&row, "level", (char *) level_of(type));
	size_t len = ZSTR_LEN(message) > MAX_MESSAGE ? MAX_MESSAGE : ZSTR_LEN(message);
	add_assoc_stringl(&row, "message", ZSTR_VAL(message), len);
	if (file) {
		add_assoc_str(&row, "file", zend_string_copy(file));
	} else {
		add_assoc_string(&row, "file", "");
	}
	add_assoc_long(&row, "line", (zend_long) line);
	add_next_index_zval(&pending, &row);
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_MASK_EX(arginfo_wpbench_issues_take, 0, 1, MAY_BE_ARRAY | MAY_BE_FALSE)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
ZEND_END_ARG_INFO()

PHP_FUNCTION(wpbench_issues_take)
{
	zend_string *given;
	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_STR(given)
	ZEND_PARSE_PARAMETERS_END();
	if (key == NULL) {
		if (ZSTR_LEN(given) < 16) {
			RETURN_FALSE;
		}
		key = zend_string_init(ZSTR_VAL(given), ZSTR_LEN(given), 1);
	} else if (!zend_string_equals(key, given)) {
		RETURN_FALSE;
	}
	array_init(return_value);
	zval issues;
	if (Z_TYPE(pending) == IS_ARRAY) {
		ZVAL_COPY_VALUE(&issues, &pending);
		ZVAL_UNDEF(&pending);
	} else {
		array_init(&issues);
	}
	add_assoc_zval(return_value, "issues", &issues);
	add_assoc_long(return_value, "total", total);
}

static const zend_function_entry functions[] = {
	ZEND_FE(wpbench_issues_take, arginfo_wpbench_issues_take)
	ZEND_FE_END
};

static PHP_MINIT_FUNCTION(wpbench_issues)
{
	zend_observer_error_register(observe);
	return SUCCESS;
}

static PHP_RINIT_FUNCTION(wpbench_issues)
{
	ZVAL_UNDEF(&pending);
	total = 0;
	kept = 0;
	return SUCCESS;
}

static PHP_RSHUTDOWN_FUNCTION(wpbench_issues)
{
	zval_ptr_dtor(&pending);
	ZVAL_UNDEF(&pending);
	return SUCCESS;
}

zend_module_entry wpbench_issues_module_entry = {
	STANDARD_MODULE_HEADER,
	"wpbench_issues",
	functions,
	PHP_MINIT(wpbench_issues),
	NULL,
	PHP_RINIT(wpbench_issues),
	PHP_RSHUTDOWN(wpbench_issues),
	NULL,
	"1.0",
	STANDARD_MODULE_PROPERTIES
};

ZEND_GET_MODULE(wpbench_issues)
