<?php
/**
 * The per-test file layout: /run/wpbench from the baseline, the opcache link or copy (before the task
 * arrives), then the candidate's snippet or plugin files. (Starting and reading the runner: sandbox.php.)
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

/**
 * Lays out /run/wpbench's site for one test: wp-content from the baseline, the opcache link or copy.
 * Nothing here depends on the task, so it is done before the task arrives.
 */
function lay_out_site( string $opcache_mode, string $opcache_id ): void {
	if ( ! \is_dir( RUN_DIR ) || ! \is_writable( RUN_DIR ) ) {
		throw new SandboxError( RUN_DIR . ' is not a writable directory: run the grader with a tmpfs there (--tmpfs ' . RUN_DIR . ':size=256m,uid=65532)' );
	}
	$content = RUN_DIR . '/wp-content';
	foreach ( array( $content, RUN_DIR . '/opcache', RUN_DIR . '/candidate' ) as $stale ) {
		remove_tree( $stale );
	}
	copy_tree( BASELINE_DIR, $content );
	if ( 'link' === $opcache_mode ) {
		// PHP 8.4 refuses a read-only file-cache directory, so the cache directory is on the
		// tmpfs and its one system-id subdirectory links to the cache built into the image.
		\mkdir( RUN_DIR . '/opcache', 0700 );
		\symlink( OPCACHE_DIR . '/' . $opcache_id, RUN_DIR . '/opcache/' . $opcache_id ) || throw new SandboxError( 'cannot link the opcache file cache' );
	} elseif ( 'copy' === $opcache_mode ) {
		copy_tree( OPCACHE_DIR, RUN_DIR . '/opcache' );
	}
}

/**
 * Writes the candidate's snippet or plugin files into the laid-out site.
 *
 * @param array<string, mixed> $task
 * @param array{main: string}|null $plugin
 * @return array{file: string, plugin: bool}
 */
function lay_out_candidate( array $task, ?array $plugin ): array {
	if ( null === $plugin ) {
		\mkdir( RUN_DIR . '/candidate', 0700 );
		$file = RUN_DIR . '/candidate/snippet.php';
		write_file( $file, snippet_source( $task['code'] ) );
		return array( 'file' => $file, 'plugin' => false );
	}
	$dir = RUN_DIR . '/wp-content/plugins/' . plugin_directory();
	foreach ( $task['files'] as $path => $body ) {
		$target = "$dir/$path";
		if ( ! \is_dir( \dirname( $target ) ) && ! \mkdir( \dirname( $target ), 0755, true ) ) {
			throw new SandboxError( "cannot create the directory of plugin file $path" );
		}
		write_file( $target, $body );
	}
	return array( 'file' => "$dir/{$plugin['main']}", 'plugin' => true );
}

/**
 * The plugin's directory name: `wp-bench-candidate-` and random hex, new for every grading, as upstream
 * WP-Bench installs it. Tests find the plugin's hooks by that prefix (`activate_wp-bench-candidate-`),
 * never by a name the candidate chose, and a candidate cannot know its own basename in advance.
 */
function plugin_directory(): string {
	return 'wp-bench-candidate-' . \bin2hex( \random_bytes( 6 ) );
}

function write_file( string $path, string $body ): void {
	if ( false === \file_put_contents( $path, $body ) ) {
		throw new SandboxError( "cannot write $path" );
	}
}

/** Copies a tree, keeping symlinks as symlinks and mtimes (the opcache keys on them). */
function copy_tree( string $from, string $to ): void {
	if ( ! \mkdir( $to, 0755 ) && ! \is_dir( $to ) ) {
		throw new SandboxError( "cannot create $to" );
	}
	foreach ( \scandir( $from ) as $name ) {
		if ( '.' === $name || '..' === $name ) {
			continue;
		}
		$src = "$from/$name";
		$dst = "$to/$name";
		if ( \is_link( $src ) ) {
			\symlink( \readlink( $src ), $dst ) || throw new SandboxError( "cannot link $dst" );
		} elseif ( \is_dir( $src ) ) {
			copy_tree( $src, $dst );
		} else {
			\copy( $src, $dst ) || throw new SandboxError( "cannot copy $src" );
			\touch( $dst, \filemtime( $src ) );
		}
	}
}

function remove_tree( string $path ): void {
	if ( \is_link( $path ) || \is_file( $path ) ) {
		\unlink( $path );
		return;
	}
	if ( ! \is_dir( $path ) ) {
		return;
	}
	foreach ( \scandir( $path ) as $name ) {
		if ( '.' !== $name && '..' !== $name ) {
			remove_tree( "$path/$name" );
		}
	}
	\rmdir( $path );
}
