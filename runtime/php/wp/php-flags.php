<?php
/**
 * PHP settings of the runner process (the one that boots WordPress and runs candidate code).
 *
 * Shared by the supervisor (run time) and build.php (the opcache warm-up must compile under
 * the settings the cache is read back with). The runner starts with `php -n` and loads only
 * what WordPress wants: that alone halves PHP's start-up time on Debian. The sandbox settings
 * (open_basedir, disable_functions, ffi.enable=0, memory_limit) are added by the supervisor.
 *
 * @return array{zend_extensions: list<string>, extensions: list<string>, ini: array<string,string>}
 */

return array(
	'zend_extensions' => array( 'opcache' ),
	'extensions'      => array(
		'pdo', 'pdo_sqlite', 'sqlite3', 'mbstring', 'xml', 'dom', 'simplexml', 'xmlreader', 'xmlwriter',
		'intl', 'curl', 'gd', 'ctype', 'iconv', 'fileinfo', 'exif', 'tokenizer', 'posix',
	),
	'ini'             => array(
		'opcache.enable'                        => '1',
		'opcache.enable_cli'                    => '1',
		'opcache.file_cache'                    => '/run/wpbench/opcache',
		'opcache.file_cache_only'               => '1',
		'opcache.file_cache_consistency_checks' => '0',
		'opcache.validate_timestamps'           => '0',
		'opcache.jit'                           => 'disable',
		'error_reporting'                       => (string) E_ALL,
		'display_errors'                        => 'stderr',
		'display_startup_errors'                => '1',
		'log_errors'                            => '0',
		'html_errors'                           => '0',
		'zend.exception_ignore_args'            => '1',
		'date.timezone'                         => 'UTC',
		'memory_limit'                          => '256M',
		'max_execution_time'                    => '0',
		'sys_temp_dir'                          => '/tmp',
		'upload_tmp_dir'                        => '/tmp',
		'session.save_path'                     => '/tmp',
		'sendmail_path'                         => '/bin/false',
	),
);
